# A tenant program as an image built on another distribution runs it: its own Python and glibc,
# libcuda.so.1 through ctypes (as PyTorch reaches the driver through dlopen), the primary context,
# then 64 MiB allocations until one is refused. Prints one JSON line.
import ctypes
import json
import platform

cuda = ctypes.CDLL("libcuda.so.1")
device, context = ctypes.c_int(0), ctypes.c_void_p(0)
if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), 0)
        or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
        or cuda.cuCtxSetCurrent(context)):
    print(json.dumps({"error": "cuInit or the primary context failed"}))
    raise SystemExit(1)
step, allocated, last_error = 64 << 20, 0, 0
while allocated < (256 << 30):
    pointer = ctypes.c_uint64(0)
    last_error = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(step))
    if last_error:
        break
    allocated += step
free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
print(json.dumps({"allocated": allocated, "last_error": last_error, "total": total.value,
                  "glibc": platform.libc_ver()[1]}))
