// A tenant program for the runtime's end-to-end tests: it reaches the (simulated) driver in one of
// the three ways real programs do, allocates, and prints what happened as one JSON line.
//   alloc_client BINDING fill STEP HOLD_S   allocate STEP bytes until refused, hold, free
//   alloc_client BINDING race THREADS SECONDS MAX_BYTES   random alloc/free from THREADS threads
//   alloc_client BINDING attack DIR STEP   allocate STEP, then overwrite every byte of every file
//                                    under DIR it can open for writing, and of every file it holds
//                                    open for writing (its activity file), with 0xff (but the
//                                    simulated GPU's sim-*.state, which stands for hardware and
//                                    driver), then allocate STEP until refused
//   alloc_client direct mixed STEP   rotate through every allocation path until refused, read NVML,
//                                    free everything and read NVML again
//   alloc_client BINDING time COUNT BYTES   COUNT pairs of allocate + free of BYTES, timed: the
//                                    nanoseconds per pair (bench/gpu_shim.sh compares bare and
//                                    shim)
//   alloc_client BINDING around STEP BYTES HOLD_S   allocate STEP (under the shim: registered
//                                    with gpumuxd), then exec itself, the same process, without
//                                    LD_PRELOAD and `take` BYTES around the shim
//   alloc_client BINDING take BYTES HOLD_S   allocate BYTES at once, hold, free
// BINDING: direct (linked against libcuda.so.1), dlopen (dlopen + dlsym), procaddr
// (cuGetProcAddress).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "abi/driver_api.h"
#include "abi/nvml_api.h"
#include "abi/primary_context.h"

namespace {

using gpumux::cuda::UsePrimaryContext;

struct Driver {
  CUresult (*init)(unsigned int);
  CUresult (*alloc)(CUdeviceptr*, size_t);
  CUresult (*free)(CUdeviceptr);
  CUresult (*info)(size_t*, size_t*);
};

Driver Bind(const std::string& how) {
  if (how == "direct") return {&cuInit, &cuMemAlloc_v2, &cuMemFree_v2, &cuMemGetInfo_v2};
  if (how == "dlopen") {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) std::exit(3);
    return {reinterpret_cast<CUresult (*)(unsigned int)>(dlsym(h, "cuInit")),
            reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(h, "cuMemAlloc_v2")),
            reinterpret_cast<CUresult (*)(CUdeviceptr)>(dlsym(h, "cuMemFree_v2")),
            reinterpret_cast<CUresult (*)(size_t*, size_t*)>(dlsym(h, "cuMemGetInfo_v2"))};
  }
  Driver d{&cuInit, nullptr, nullptr, nullptr};
  cuGetProcAddress("cuMemAlloc", reinterpret_cast<void**>(&d.alloc), 12000, 0);
  cuGetProcAddress("cuMemFree", reinterpret_cast<void**>(&d.free), 12000, 0);
  cuGetProcAddress("cuMemGetInfo", reinterpret_cast<void**>(&d.info), 12000, 0);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  Driver d = Bind(argv[1]);
  if (d.init(0) != 0 || UsePrimaryContext() != 0) {
    std::printf("{\"error\": \"cuInit or the primary context failed\"}\n");
    return 4;
  }
  std::string mode = argv[2];
  if (mode == "fill" && argc >= 5) {
    size_t step = std::strtoull(argv[3], nullptr, 10);
    std::vector<CUdeviceptr> held;
    CUresult last = 0;
    while (true) {
      CUdeviceptr p;
      last = d.alloc(&p, step);
      if (last != 0) break;
      held.push_back(p);
    }
    size_t free_bytes = 0, total = 0;
    d.info(&free_bytes, &total);
    std::printf("{\"allocated\": %zu, \"last_error\": %d, \"total\": %zu, \"free\": %zu}\n",
                held.size() * step, last, total, free_bytes);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[4])));
    for (CUdeviceptr p : held) d.free(p);
    return 0;
  }
  if (mode == "around" && argc >= 6) {
    CUdeviceptr p;
    if (CUresult first = d.alloc(&p, std::strtoull(argv[3], nullptr, 10)); first != 0) {
      std::printf("{\"allocated\": 0, \"last_error\": %d}\n", first);
      return 0;
    }
    unsetenv("LD_PRELOAD");
    execl("/proc/self/exe", argv[0], argv[1], "take", argv[4], argv[5], nullptr);
    return 6;
  }
  if (mode == "take" && argc >= 5) {
    size_t bytes = std::strtoull(argv[3], nullptr, 10);
    CUdeviceptr p;
    CUresult last = d.alloc(&p, bytes);
    std::printf("{\"allocated\": %zu, \"last_error\": %d}\n", last == 0 ? bytes : 0, last);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[4])));
    if (last == 0) d.free(p);
    return 0;
  }
  if (mode == "attack" && argc >= 5) {
    size_t step = std::strtoull(argv[4], nullptr, 10);
    std::vector<CUdeviceptr> held;
    CUdeviceptr p;
    CUresult last = d.alloc(&p, step);  // the shim now has the ledger and its grant
    if (last == 0) held.push_back(p);
    int rewritten = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             argv[3], std::filesystem::directory_options::skip_permission_denied)) {
      if (!entry.is_regular_file() || entry.path().filename().string().rfind("sim-", 0) == 0)
        continue;
      int fd = open(entry.path().c_str(), O_RDWR);
      if (fd < 0) continue;
      std::vector<char> bytes(size_t(entry.file_size()), char(0xff));
      if (pwrite(fd, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size())) ++rewritten;
      close(fd);
    }
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code error;
      std::string target = std::filesystem::read_symlink(entry.path(), error).string();
      int fd = std::atoi(entry.path().filename().c_str());
      struct stat st;
      if (error || target.find("/sim-") != std::string::npos || fstat(fd, &st) != 0 ||
          !S_ISREG(st.st_mode) || (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR)
        continue;
      std::vector<char> bytes(size_t(st.st_size), char(0xff));
      if (pwrite(fd, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size())) ++rewritten;
    }
    while (last == 0) {
      last = d.alloc(&p, step);
      if (last == 0) held.push_back(p);
    }
    std::printf("{\"allocated\": %zu, \"last_error\": %d, \"files_rewritten\": %d}\n",
                held.size() * step, last, rewritten);
    for (CUdeviceptr q : held) d.free(q);
    return 0;
  }
  if (mode == "race" && argc >= 6) {
    int threads = std::atoi(argv[3]);
    double seconds = std::atof(argv[4]);
    size_t max_bytes = std::strtoull(argv[5], nullptr, 10);
    std::atomic<long> allocs{0}, refusals{0};
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        UsePrimaryContext();
        std::mt19937_64 rng(getpid() * 131 + t);
        std::vector<CUdeviceptr> held;
        while (std::chrono::steady_clock::now() < end) {
          if (!held.empty() && rng() % 2) {
            size_t i = rng() % held.size();
            d.free(held[i]);
            held[i] = held.back();
            held.pop_back();
          } else {
            CUdeviceptr p;
            if (d.alloc(&p, 1 + rng() % max_bytes) == 0) {
              held.push_back(p);
              ++allocs;
            } else {
              ++refusals;
            }
          }
        }
        for (CUdeviceptr p : held) d.free(p);
      });
    }
    for (auto& th : pool) th.join();
    std::printf("{\"allocations\": %ld, \"refusals\": %ld}\n", allocs.load(), refusals.load());
    return 0;
  }
  if (mode == "time" && argc >= 5) {
    long count = std::atol(argv[3]);
    size_t bytes = std::strtoull(argv[4], nullptr, 10);
    CUdeviceptr p;
    if (d.alloc(&p, bytes) != 0) return 5;  // the first pair sets up the driver (and a shim)
    d.free(p);
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < count; ++i) {
      if (d.alloc(&p, bytes) != 0) return 5;
      d.free(p);
    }
    std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    std::printf("{\"ns_per_pair\": %.1f, \"pairs\": %ld}\n", took.count() / double(count), count);
    return 0;
  }
  if (mode == "mixed") {
    size_t step = std::strtoull(argv[3], nullptr, 10);
    std::vector<CUdeviceptr> ptrs, async_ptrs;
    std::vector<CUmemGenericAllocationHandle> handles;
    std::vector<CUarray> arrays;
    std::vector<CUmipmappedArray> mipmapped;
    CUmemAllocationProp pinned_on_device_0{};
    pinned_on_device_0.type = 1;  // pinned
    pinned_on_device_0.location = {gpumux::cuda::kMemLocationDevice, 0};
    const CUmemAllocationProp* prop = &pinned_on_device_0;
    size_t total = 0;
    CUresult last = 0;
    for (int i = 0; last == 0; ++i) {
      CUdeviceptr p = 0;
      switch (i % 8) {
        case 0:
          last = cuMemAlloc_v2(&p, step);
          if (!last) ptrs.push_back(p);
          break;
        case 1:
          last = cuMemAllocAsync(&p, step, nullptr);
          if (!last) async_ptrs.push_back(p);
          break;
        case 2:
          last = cuMemAllocFromPoolAsync(&p, step, nullptr, nullptr);
          if (!last) async_ptrs.push_back(p);
          break;
        case 3:
          last = cuMemAllocManaged(&p, step, 1);
          if (!last) ptrs.push_back(p);
          break;
        case 4: {
          CUmemGenericAllocationHandle h;
          last = cuMemCreate(&h, step, prop, 0);
          if (!last) handles.push_back(h);
          break;
        }
        case 5: {
          CUarray a;
          CUDA_ARRAY_DESCRIPTOR d{step / 4, 1, 0x20, 1};  // float, one channel
          last = cuArrayCreate_v2(&a, &d);
          if (!last) arrays.push_back(a);
          break;
        }
        case 6: {  // 3D: step/64 x 4 x 4 floats
          CUarray a;
          CUDA_ARRAY3D_DESCRIPTOR d{step / 64, 4, 4, 0x20, 1, 0};
          last = cuArray3DCreate_v2(&a, &d);
          if (!last) arrays.push_back(a);
          break;
        }
        case 7: {  // mipmapped 2D, one level: the same bytes as a 2D array
          CUmipmappedArray a;
          CUDA_ARRAY3D_DESCRIPTOR d{step / 16, 4, 0, 0x20, 1, 0};
          last = cuMipmappedArrayCreate(&a, &d, 1);
          if (!last) mipmapped.push_back(a);
          break;
        }
      }
      if (!last) total += step;
    }
    auto nvml = [] {
      void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
      if (!h) return std::string("{}");
      auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(h, "nvmlInit_v2"));
      auto get = reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(
          dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
      auto mem =
          reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
      auto procs = reinterpret_cast<decltype(&nvmlDeviceGetComputeRunningProcesses_v3)>(
          dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
      nvmlDevice_t dev;
      nvmlMemory_t m{};
      unsigned count = 0;
      init();
      get(0, &dev);
      mem(dev, &m);
      procs(dev, &count, nullptr);
      char buf[200];
      std::snprintf(buf, sizeof(buf), "{\"total\": %llu, \"used\": %llu, \"processes\": %u}",
                    m.total, m.used, count);
      return std::string(buf);
    };
    std::string held = nvml();
    for (CUdeviceptr p : ptrs) cuMemFree_v2(p);
    for (CUdeviceptr p : async_ptrs) cuMemFreeAsync(p, nullptr);
    for (auto h : handles) cuMemRelease(h);
    for (CUarray a : arrays) cuArrayDestroy(a);
    for (CUmipmappedArray a : mipmapped) cuMipmappedArrayDestroy(a);
    std::string freed = nvml();
    std::printf("{\"allocated\": %zu, \"last_error\": %d, \"nvml_held\": %s, \"nvml_freed\": %s}\n",
                total, last, held.c_str(), freed.c_str());
    return 0;
  }
  return 2;
}
