// A tenant program for the runtime's end-to-end tests: it reaches the (simulated) driver in one of
// the three ways real programs do, allocates, and prints what happened as one JSON line.
//   alloc_client BINDING fill STEP HOLD_S   allocate STEP bytes until refused, hold, free
//   alloc_client BINDING race THREADS SECONDS MAX_BYTES   random alloc/free from THREADS threads
// BINDING: direct (linked against libcuda.so.1), dlopen (dlopen + dlsym), procaddr (cuGetProcAddress).
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "simgpu/cuda_types.h"

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
}

namespace {

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
  if (d.init(0) != 0) {
    std::printf("{\"error\": \"cuInit failed\"}\n");
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
    std::printf("{\"allocated\": %zu, \"last_error\": %d, \"total\": %zu, \"free\": %zu}\n", held.size() * step, last,
                total, free_bytes);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[4])));
    for (CUdeviceptr p : held) d.free(p);
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
  return 2;
}
