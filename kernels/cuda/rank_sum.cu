#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/rank_sum.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kThreads = 256;

__global__ void SumInRankOrderKernel(float* mine, const float* received, int64_t stride, int32_t ranks, int32_t me,
                                     int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= count) return;
  float sum = me == 0 ? mine[i] : received[i];
  for (int32_t q = 1; q < ranks; ++q) sum = __fadd_rn(sum, q == me ? mine[i] : received[q * stride + i]);
  mine[i] = sum;
}

}  // namespace

void LaunchSumInRankOrder(float* mine, const float* received, int64_t stride, int32_t ranks, int32_t me, int64_t count,
                          ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  auto* kernel = &SumInRankOrderKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>((count + kThreads - 1) / kThreads)), dim3(kThreads), 0, stream,
                 mine, received, stride, ranks, me, count);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
