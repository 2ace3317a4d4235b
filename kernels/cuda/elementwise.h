// Row-wise and element-wise kernels of the forward pass on the GPU,
// with kernels/cpu/elementwise.h's semantics. Shapes are row-major, in
// device memory; `rows` rows of `n` floats.
//
// Exactness: RMSNorm reduces each row's squares with one block in a fixed
// tree (thread t sums elements t, t + 256, ... in order; then a butterfly
// within each warp; then the 8 warp sums in warp order), independent of how
// many rows run. Everything else is element-wise.
//
//   LaunchRmsNorm(x, weight, y, rows, 576, 1e-5f, stream);
#pragma once

#include <cstdint>

#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight. y may alias x.
void LaunchRmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
                   ::kvfleet::cuda::Stream stream);
// out[i] = silu(gate[i]) · up[i]; out may alias gate.
void LaunchSwiGlu(const float* gate, const float* up, float* out, int64_t count, ::kvfleet::cuda::Stream stream);
// out[i] = gelu_tanh(gate[i]) · up[i] (kernels/cpu/elementwise.h); out may alias gate.
// out[i] = silu(x[i]); out may alias x.
void LaunchSilu(const float* x, float* out, int64_t count, ::kvfleet::cuda::Stream stream);

void LaunchGeluTanhMul(const float* gate, const float* up, float* out, int64_t count, ::kvfleet::cuda::Stream stream);
// x[i] *= s.
void LaunchScale(float* x, int64_t count, float s, ::kvfleet::cuda::Stream stream);
// y[i] += x[i].
void LaunchAddInPlace(float* y, const float* x, int64_t count, ::kvfleet::cuda::Stream stream);
// y[r] += bias for `rows` rows of n.
void LaunchAddBias(float* y, const float* bias, int64_t rows, int64_t n, ::kvfleet::cuda::Stream stream);
// out[i] = x[rows[i]], rows of n floats.
void LaunchGatherRows(const float* x, const int32_t* rows, int64_t count, int64_t n, float* out,
                      ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
