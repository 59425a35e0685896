// Tenant programs that do to GPU memory what LLM engines do, for the engine-compatibility tests
// (tests/llm_engine_test.cc). Each prints one JSON line and exits 0 when every step it expects to
// succeed did; memory figures are as the program sees them (under gpumux: the tenant's).
//   llm_client fill-each STEP        on each device in turn: allocate STEP until refused; the
//                                    usage of every device after each fill; free all
//   llm_client vllm RANK UTIL        as vLLM sizes its KV cache: on device RANK, weights (a quarter
//                                    of the total), then KV blocks up to cuMemGetInfo's total ×
//                                    UTIL, then a CUDA graph with a private memory pool (64 MiB)
//   llm_client sglang RANK FRACTION  as SGLang does: the total from NVML (index RANK), weights,
//   then
//                                    KV up to total × FRACTION
//   llm_client expandable RANK CHUNK as PyTorch's expandable segments: one reserved address range,
//                                    CHUNK-sized cuMemCreate handles mapped until refused, half
//                                    unmapped and released, grown again; and host-located memory
//                                    of the device's size
//   llm_client tp-export SOCKET BYTES  tensor-parallel rank 0 on device 0: BYTES by cuMemAlloc
//                                    shared as an IPC handle and BYTES by cuMemCreate shared as a
//                                    POSIX file descriptor, sent over the Unix socket SOCKET
//   llm_client tp-import SOCKET      rank 1 on device 1: opens both, maps them, enables peer
//                                    access, and reads every device's usage before and after
// Memory contents are never touched: the simulated GPU does not keep them.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "abi/driver_api.h"
#include "abi/nvml_api.h"
#include "abi/primary_context.h"

namespace {

using gpumux::cuda::UsePrimaryContext;

constexpr uint64_t kMiB = 1ull << 20;

[[noreturn]] void Fail(const std::string& what, CUresult r = 0) {
  std::printf("{\"error\": \"%s\", \"code\": %d}\n", what.c_str(), r);
  std::exit(1);
}
void Check(CUresult r, const std::string& what) {
  if (r != 0) Fail(what, r);
}

int DeviceCount() {
  int n = 0;
  Check(cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

// Bytes in use on device `d` as cuMemGetInfo reports it (the current context is left on `d`).
uint64_t UsedOn(int d) {
  Check(UsePrimaryContext(d), "context of device " + std::to_string(d));
  size_t free_bytes = 0, total = 0;
  Check(cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  return total - free_bytes;
}

std::string UsedOnEach() {
  std::string list = "[";
  for (int d = 0; d < DeviceCount(); ++d) list += (d ? ", " : "") + std::to_string(UsedOn(d));
  return list + "]";
}

// Allocates `bytes` in blocks of at most `block` (2 MiB aligned, as engines' allocators round).
std::vector<CUdeviceptr> AllocateBlocks(uint64_t bytes, uint64_t block) {
  std::vector<CUdeviceptr> held;
  for (uint64_t left = bytes & ~(2 * kMiB - 1); left > 0;) {
    uint64_t n = std::min(left, block);
    CUdeviceptr p;
    Check(cuMemAlloc_v2(&p, n), "cuMemAlloc of " + std::to_string(n));
    held.push_back(p);
    left -= n;
  }
  return held;
}
void FreeAll(std::vector<CUdeviceptr>& held) {
  for (CUdeviceptr p : held) Check(cuMemFree_v2(p), "cuMemFree");
  held.clear();
}

int FillEach(uint64_t step) {
  std::string allocated = "[", after = "[";
  std::vector<CUdeviceptr> held;
  for (int d = 0; d < DeviceCount(); ++d) {
    Check(UsePrimaryContext(d), "context");
    uint64_t got = 0;
    CUdeviceptr p;
    while (cuMemAlloc_v2(&p, step) == 0) held.push_back(p), got += step;
    allocated += (d ? ", " : "") + std::to_string(got);
    after += std::string(d ? ", " : "") + UsedOnEach();
  }
  FreeAll(held);
  std::printf("{\"allocated\": %s], \"used_after_each_fill\": %s], \"used_at_end\": %s}\n",
              allocated.c_str(), after.c_str(), UsedOnEach().c_str());
  return 0;
}

// A CUDA graph whose memory node takes `bytes` from a private pool when instantiated (vLLM captures
// its decode steps so).
CUgraphExec GraphWithPool(uint64_t bytes) {
  CUgraph graph;
  Check(cuGraphCreate(&graph, 0), "cuGraphCreate");
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.bytesize = bytes;
  CUgraphNode node;
  Check(cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &params), "cuGraphAddMemAllocNode");
  CUgraphExec exec;
  Check(cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate (graph pool)");
  Check(cuGraphDestroy(graph), "cuGraphDestroy");
  return exec;
}

int Vllm(int rank, double utilization) {
  Check(UsePrimaryContext(rank), "context");
  size_t free_bytes = 0, total = 0;
  Check(cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  std::vector<CUdeviceptr> weights = AllocateBlocks(total / 4, 256 * kMiB);
  Check(cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  uint64_t requested = uint64_t(double(total) * utilization);
  uint64_t in_use = total - free_bytes;
  uint64_t kv = requested > in_use ? requested - in_use : 0;
  std::vector<CUdeviceptr> cache = AllocateBlocks(kv, kv / 32 + 2 * kMiB);  // one per layer
  CUgraphExec graph = GraphWithPool(64 * kMiB);
  uint64_t peak = UsedOn(rank);
  Check(cuGraphExecDestroy(graph), "cuGraphExecDestroy");
  FreeAll(cache);
  FreeAll(weights);
  std::printf(
      "{\"rank\": %d, \"total\": %zu, \"kv\": %llu, \"peak\": %llu, \"used_at_end\": %llu}\n", rank,
      total, (unsigned long long)kv, (unsigned long long)peak, (unsigned long long)UsedOn(rank));
  return 0;
}

int Sglang(int rank, double fraction) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) Fail("libnvidia-ml.so.1");
  auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto memory =
      reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  nvmlDevice_t device;
  nvmlMemory_t m{};
  if (!init || !handle || !memory || init() != 0 || handle(unsigned(rank), &device) != 0 ||
      memory(device, &m) != 0)
    Fail("NVML memory of device " + std::to_string(rank));
  Check(UsePrimaryContext(rank), "context");
  uint64_t static_bytes = uint64_t(double(m.total) * fraction);
  std::vector<CUdeviceptr> weights = AllocateBlocks(m.total / 4, 256 * kMiB);
  std::vector<CUdeviceptr> cache = AllocateBlocks(static_bytes - m.total / 4, 512 * kMiB);
  uint64_t peak = UsedOn(rank);
  FreeAll(cache);
  FreeAll(weights);
  std::printf("{\"rank\": %d, \"nvml_total\": %llu, \"peak\": %llu, \"used_at_end\": %llu}\n", rank,
              (unsigned long long)m.total, (unsigned long long)peak,
              (unsigned long long)UsedOn(rank));
  return 0;
}

CUmemAllocationProp Located(int type, int id, int handle_types = 0) {
  CUmemAllocationProp prop{};
  prop.type = 1;  // pinned
  prop.requestedHandleTypes = handle_types;
  prop.location = {type, id};
  return prop;
}

int Expandable(int rank, uint64_t chunk) {
  Check(UsePrimaryContext(rank), "context");
  size_t free_bytes = 0, total = 0;
  Check(cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  CUdeviceptr base;
  Check(cuMemAddressReserve(&base, 2 * total, 0, 0, 0), "cuMemAddressReserve");
  CUmemAllocationProp on_device = Located(gpumux::cuda::kMemLocationDevice, rank);
  std::vector<CUmemGenericAllocationHandle> segments;
  auto grow = [&] {
    uint64_t grown = 0;
    CUmemGenericAllocationHandle h;
    while (cuMemCreate(&h, chunk, &on_device, 0) == 0) {
      Check(cuMemMap(base + segments.size() * chunk, chunk, 0, h, 0), "cuMemMap");
      segments.push_back(h);
      grown += chunk;
    }
    return grown;
  };
  uint64_t first = grow();
  uint64_t kept = segments.size() / 2;
  while (segments.size() > kept) {
    Check(cuMemUnmap(base + (segments.size() - 1) * chunk, chunk), "cuMemUnmap");
    Check(cuMemRelease(segments.back()), "cuMemRelease");
    segments.pop_back();
  }
  uint64_t again = grow();
  // Host memory through the same API (pinned buffers, CPU offload): none of the GPU's.
  CUmemAllocationProp on_host = Located(gpumux::cuda::kMemLocationHost, 0);
  CUmemGenericAllocationHandle host;
  Check(cuMemCreate(&host, total, &on_host, 0), "cuMemCreate on the host");
  uint64_t with_host = UsedOn(rank);
  Check(cuMemRelease(host), "cuMemRelease (host)");
  for (size_t i = segments.size(); i-- > 0;) {
    Check(cuMemUnmap(base + i * chunk, chunk), "cuMemUnmap");
    Check(cuMemRelease(segments[i]), "cuMemRelease");
  }
  Check(cuMemAddressFree(base, 2 * total), "cuMemAddressFree");
  std::printf(
      "{\"total\": %zu, \"grown\": %llu, \"kept\": %llu, \"grown_again\": %llu, "
      "\"used_with_host_memory\": %llu, \"used_at_end\": %llu}\n",
      total, (unsigned long long)first, (unsigned long long)(kept * chunk),
      (unsigned long long)again, (unsigned long long)with_host, (unsigned long long)UsedOn(rank));
  return 0;
}

// Rank 0 and rank 1 of a tensor-parallel pair exchange a 64-byte IPC handle and a file descriptor
// (SCM_RIGHTS) over a Unix socket, as NCCL's proxies do.
struct Exchange {
  CUipcMemHandle ipc;
};
// The message that carries it, with room for one file descriptor.
struct FdMessage {
  Exchange x{};
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&x, sizeof(x)};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
};

sockaddr_un SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return addr;
}

int TpExport(const std::string& path, uint64_t bytes) {
  Check(cuInit(0), "cuInit");
  Check(UsePrimaryContext(0), "context");
  CUdeviceptr buffer;
  Check(cuMemAlloc_v2(&buffer, bytes), "cuMemAlloc");
  FdMessage m;
  Check(cuIpcGetMemHandle(&m.x.ipc, buffer), "cuIpcGetMemHandle");
  CUmemAllocationProp prop =
      Located(gpumux::cuda::kMemLocationDevice, 0, gpumux::cuda::kMemHandlePosixFileDescriptor);
  CUmemGenericAllocationHandle segment;
  Check(cuMemCreate(&segment, bytes, &prop, 0), "cuMemCreate (shareable)");
  int fd = -1;
  Check(cuMemExportToShareableHandle(&fd, segment, gpumux::cuda::kMemHandlePosixFileDescriptor, 0),
        "cuMemExportToShareableHandle");

  int server = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = SocketAddress(path);
  unlink(path.c_str());
  if (bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(server, 1) != 0)
    Fail("listen on " + path);
  int peer = accept(server, nullptr, nullptr);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(peer, &m.msg, 0) != ssize_t(sizeof(m.x))) Fail("sendmsg");
  char done = 0;
  if (read(peer, &done, 1) != 1) Fail("the importer's answer");  // it has closed what it opened
  std::string used = UsedOnEach();
  Check(cuMemFree_v2(buffer), "cuMemFree");
  Check(cuMemRelease(segment), "cuMemRelease");
  close(fd);
  close(peer);
  close(server);
  std::printf("{\"rank\": 0, \"used_while_shared\": %s, \"used_at_end\": %s}\n", used.c_str(),
              UsedOnEach().c_str());
  return 0;
}

int TpImport(const std::string& path) {
  Check(cuInit(0), "cuInit");
  if (DeviceCount() < 2) Fail("rank 1 needs a second device");
  std::string before = UsedOnEach();
  int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = SocketAddress(path);
  for (int i = 0; connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0; ++i) {
    if (i == 500) Fail("connect to " + path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FdMessage m;
  if (recvmsg(sock, &m.msg, MSG_WAITALL) != ssize_t(sizeof(m.x))) Fail("recvmsg");
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) Fail("no file descriptor came");
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));

  Check(UsePrimaryContext(1), "context");
  CUcontext mine, peer;
  Check(cuCtxGetCurrent(&mine), "cuCtxGetCurrent");
  Check(cuDevicePrimaryCtxRetain(&peer, 0), "peer context");
  int can = 0;
  Check(cuDeviceCanAccessPeer(&can, 1, 0), "cuDeviceCanAccessPeer");
  if (!can) Fail("device 1 cannot reach device 0");
  Check(cuCtxEnablePeerAccess(peer, 0), "cuCtxEnablePeerAccess");
  CUdeviceptr opened;
  Check(cuIpcOpenMemHandle_v2(&opened, m.x.ipc, 1), "cuIpcOpenMemHandle");
  CUmemGenericAllocationHandle imported;
  Check(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(fd)),
                                       gpumux::cuda::kMemHandlePosixFileDescriptor),
        "cuMemImportFromShareableHandle");
  CUdeviceptr range;
  Check(cuMemAddressReserve(&range, 64 * kMiB, 0, 0, 0), "cuMemAddressReserve");
  Check(cuMemMap(range, 64 * kMiB, 0, imported, 0), "cuMemMap");
  std::string during = UsedOnEach();
  Check(UsePrimaryContext(1), "context");
  Check(cuMemUnmap(range, 64 * kMiB), "cuMemUnmap");
  Check(cuMemRelease(imported), "cuMemRelease (imported)");
  Check(cuIpcCloseMemHandle(opened), "cuIpcCloseMemHandle");
  Check(cuCtxDisablePeerAccess(peer), "cuCtxDisablePeerAccess");
  close(fd);
  char done = 1;
  if (write(sock, &done, 1) != 1) Fail("answer");
  close(sock);
  std::printf("{\"rank\": 1, \"used_before\": %s, \"used_while_open\": %s}\n", before.c_str(),
              during.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string mode = argv[1];
  if (mode != "tp-import" && mode != "tp-export" && cuInit(0) != 0) Fail("cuInit");
  if (mode == "fill-each") return FillEach(std::strtoull(argv[2], nullptr, 10));
  if (mode == "vllm" && argc >= 4) return Vllm(std::atoi(argv[2]), std::atof(argv[3]));
  if (mode == "sglang" && argc >= 4) return Sglang(std::atoi(argv[2]), std::atof(argv[3]));
  if (mode == "expandable" && argc >= 4)
    return Expandable(std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10));
  if (mode == "tp-export" && argc >= 4)
    return TpExport(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (mode == "tp-import") return TpImport(argv[2]);
  return 2;
}
