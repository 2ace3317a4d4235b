#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/lora.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// Block b takes the b-th row of the segments, counted in segment order.
__global__ void __launch_bounds__(kThreads)
    AddLoraKernel(const LoraSegment* segments, int32_t count, const float* x, int64_t in, float* y, int64_t out) {
  __shared__ float h[kMaxLoraRank];
  int64_t index = blockIdx.x;
  int32_t s = 0;
  while (s < count && index >= segments[s].rows) index -= segments[s++].rows;
  if (s == count) return;
  const LoraSegment seg = segments[s];
  if (seg.a == nullptr) return;
  const int64_t row = seg.first_row + index;
  const float* xr = x + row * in;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int32_t r = warp; r < seg.rank; r += kWarps) {
    const float* ar = seg.a + static_cast<int64_t>(r) * in;
    float sum = 0.0f;
    for (int64_t i = lane; i < in; i += 32) sum = __fmaf_rn(ar[i], xr[i], sum);
    sum = ::kvfleet::cuda::GroupSum(sum, 32);
    if (lane == 0) h[r] = sum;
  }
  __syncthreads();
  float* yr = y + row * out;
  for (int64_t o = threadIdx.x; o < out; o += kThreads) {
    const float* br = seg.b + o * seg.rank;
    float sum = 0.0f;
    for (int32_t r = 0; r < seg.rank; ++r) sum = __fmaf_rn(br[r], h[r], sum);
    yr[o] = __fadd_rn(yr[o], __fmul_rn(seg.scale, sum));
  }
}

}  // namespace

void LaunchAddLora(const LoraSegment* segments, int32_t count, int64_t rows, const float* x, int64_t in, float* y,
                   int64_t out, ::kvfleet::cuda::Stream stream) {
  if (count == 0 || rows == 0) return;
  auto* kernel = &AddLoraKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, segments, count, x, in, y, out);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
