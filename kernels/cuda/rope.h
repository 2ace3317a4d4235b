// Rotary position embedding on the GPU, in place on query or key heads,
// from a table of cos/sin per position computed once on the host by
// kernels/common's RopeCosSin (the one definition of the angles): the rotation
// is then bit-identical to the CPU backend's.
//
// Shapes (device memory): x [tokens, heads, head_dim]; positions [tokens];
// cos_table and sin_table [max_position, rot_dim / 2].
//
//   LaunchRope({.mode = RopeMode::kAdjacent, .head_dim = 64, .rot_dim = 64}, cos, sin, positions, q, T, 9, stream);
#pragma once

#include <cstdint>

#include "kernels/common/rope_tables.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// Uses p.mode, p.head_dim and p.rot_dim; the angle parameters are the table's.
void LaunchRope(const RopeParams& p, const float* cos_table, const float* sin_table, const int32_t* positions,
                float* x, int64_t tokens, int64_t heads, ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
