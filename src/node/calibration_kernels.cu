// The kernels `gpumux calibrate` runs on a real GPU, in CUDA C. gpumux ships their PTX (compiled for
// compute_80: A100 and every later GPU JIT-compiles it) in calibration_kernels_ptx.h, so building
// gpumux needs no CUDA toolkit; after changing this file, regenerate that header with
//   src/node/calibration_kernels.sh
// (needs nvcc; the calibration test checks the two agree where nvcc is installed).
#include <mma.h>

#include <cuda_bf16.h>

// Reads `bytes` (a multiple of 16) once, 16 bytes per load, grid-stride; the XOR of what it read is
// written only if it equals a value no buffer holds, so the reads cannot be optimised away.
extern "C" __global__ void stream(const uint4* __restrict__ in, unsigned long long bytes,
                                  unsigned int* out) {
  unsigned long long n = bytes / 16, stride = (unsigned long long)gridDim.x * blockDim.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    uint4 v = __ldcs(in + i);  // streaming: not kept in L2
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) out[0] = acc.x;
}

// Matrix math on the tensor cores, as a GEMM's inner loop does it: each warp multiplies 16x16x16
// bf16 tiles held in registers into four fp32 accumulators, `iterations` times
// (4 x 8,192 FLOP per warp per iteration).
extern "C" __global__ void math(unsigned int iterations, float* out) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1, c2, c3;
  wmma::fill_fragment(a, __float2bfloat16(1.0f / 1024));
  wmma::fill_fragment(b, __float2bfloat16(1.0f / 1024));
  wmma::fill_fragment(c0, 0.0f);
  wmma::fill_fragment(c1, 0.0f);
  wmma::fill_fragment(c2, 0.0f);
  wmma::fill_fragment(c3, 0.0f);
  for (unsigned int i = 0; i < iterations; ++i) {
    wmma::mma_sync(c0, a, b, c0);
    wmma::mma_sync(c1, a, b, c1);
    wmma::mma_sync(c2, a, b, c2);
    wmma::mma_sync(c3, a, b, c3);
  }
  float sum = c0.x[0] + c1.x[0] + c2.x[0] + c3.x[0];
  if (sum == -1.0f) out[0] = sum;  // never: the products are positive
}

// Nothing: the cost of a launch.
extern "C" __global__ void empty() {}
