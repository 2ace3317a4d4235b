#include "kernels/cuda/elementwise.h"

#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kNormThreads = 256;
constexpr int kElementThreads = 256;

unsigned BlocksFor(int64_t count) { return static_cast<unsigned>((count + kElementThreads - 1) / kElementThreads); }

__global__ void __launch_bounds__(kNormThreads) RmsNormKernel(const float* x, const float* weight, float* y, int64_t n,
                                                               float eps) {
  __shared__ float warp_sums[kNormThreads / 32];
  __shared__ float scale;
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) sum = __fmaf_rn(xr[i], xr[i], sum);
  sum = ::kvfleet::cuda::GroupSum(sum, 32);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kNormThreads / 32; ++w) total = __fadd_rn(total, warp_sums[w]);
    scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(n)), eps)));
  }
  __syncthreads();
  // Every x is read before any y is written: y may alias x.
  const float s = scale;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) yr[i] = __fmul_rn(__fmul_rn(xr[i], s), weight[i]);
}

__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i >= count) return;
  const float g = gate[i];
  out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
}

__global__ void SiluKernel(const float* x, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i >= count) return;
  const float v = x[i];
  out[i] = __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
}

__global__ void GeluTanhMulKernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i >= count) return;
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCubic = 0.044715f;
  const float g = gate[i];
  const float inner = __fmul_rn(kSqrt2OverPi, __fadd_rn(g, __fmul_rn(kCubic, __fmul_rn(__fmul_rn(g, g), g))));
  out[i] = __fmul_rn(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner))), up[i]);
}

__global__ void ScaleKernel(float* x, int64_t count, float s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i < count) x[i] = __fmul_rn(x[i], s);
}

__global__ void AddKernel(float* y, const float* x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i < count) y[i] = __fadd_rn(y[i], x[i]);
}

__global__ void AddBiasKernel(float* y, const float* bias, int64_t count, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (i < count) y[i] = __fadd_rn(y[i], bias[i % n]);
}

__global__ void GatherKernel(const float* x, const int32_t* rows, int64_t n, float* out) {
  const int64_t r = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[r]) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[r * n + i] = src[i];
}

}  // namespace

void LaunchRmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
                   ::kvfleet::cuda::Stream stream) {
  if (rows == 0) return;
  auto* kernel = &RmsNormKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, stream, x, weight, y, n, eps);
}

void LaunchSwiGlu(const float* gate, const float* up, float* out, int64_t count, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &SwiGluKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(count)), dim3(kElementThreads), 0, stream, gate, up, out, count);
}

void LaunchSilu(const float* x, float* out, int64_t count, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &SiluKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(count)), dim3(kElementThreads), 0, stream, x, out, count);
}

void LaunchGeluTanhMul(const float* gate, const float* up, float* out, int64_t count, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &GeluTanhMulKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(count)), dim3(kElementThreads), 0, stream, gate, up, out, count);
}

void LaunchScale(float* x, int64_t count, float s, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &ScaleKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(count)), dim3(kElementThreads), 0, stream, x, count, s);
}

void LaunchAddInPlace(float* y, const float* x, int64_t count, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &AddKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(count)), dim3(kElementThreads), 0, stream, y, x, count);
}

void LaunchAddBias(float* y, const float* bias, int64_t rows, int64_t n, ::kvfleet::cuda::Stream stream) {
  if (rows == 0) return;
  auto* kernel = &AddBiasKernel;
  KVFLEET_LAUNCH(kernel, dim3(BlocksFor(rows * n)), dim3(kElementThreads), 0, stream, y, bias, rows * n, n);
}

void LaunchGatherRows(const float* x, const int32_t* rows, int64_t count, int64_t n, float* out,
                      ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &GatherKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>(count)), dim3(128), 0, stream, x, rows, n, out);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
