// y = x · Wᵀ on the GPU, W in its storage type (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1), dequantized in the kernel as it is read.
//
// Shapes (row-major, device memory):
//   w: [n, k] in w_type   (one output feature per row; k a multiple of 32)
//   x: [m, k] float32
//   y: [m, n] float32
//
// Exactness: y[i][j] is one warp's dot product of row j of W with row i of
// x. Lane l takes chunks l, l + 32, l + 64, ... of the row (dequant.cuh's
// chunk: one block, or 8 elements) and accumulates each chunk's elements in
// order with one fused multiply-add each; the 32 lane sums are then added by
// a fixed xor-butterfly tree. That order depends on k and the type only:
// never on m, on how many x rows a warp takes at once, or on the grid, so a
// row's result is identical at every batch size (kernels/cuda/README.md).
// No split-K, no atomics.
//
//   LaunchMatMul({.w_type = DType::kQ4_1, .w = w, .n = 1536, .k = 576, .x = x, .m = 7, .y = y}, stream);
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

struct MatMulParams {
  DType w_type = DType::kF32;
  const void* w = nullptr;  // [n, k]
  int64_t n = 0;
  int64_t k = 0;
  const float* x = nullptr;  // [m, k]
  int64_t m = 0;
  float* y = nullptr;  // [m, n]
};

void LaunchMatMul(const MatMulParams& p, ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
