// The sum a tensor-parallel rank takes of its chunk of an all-reduce, on
// the GPU: the ranks' values added in rank order, ((v₀ + v₁) + v₂) + …,
// the order of every kvfleet all-reduce (engine/executor/collective.h),
// whatever moved the values there. Shapes in device memory: `mine` holds
// this rank's own chunk, `received` rank q's at q × stride (q ≠ me).
//
//   LaunchSumInRankOrder(x + offset, received, chunk, /*ranks=*/4, /*me=*/1, len, stream);
#pragma once

#include <cstdint>

#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// mine[i] = Σ over q in rank order of (q == me ? mine[i] : received[q × stride + i]), i < count.
void LaunchSumInRankOrder(float* mine, const float* received, int64_t stride, int32_t ranks, int32_t me, int64_t count,
                          ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
