// Rotary position embedding applied in place to query or key heads, from
// the angles of kernels/common/rope_tables.h (computed once per forward
// pass, shared by every layer's queries and keys).
//
// Shapes: x is [tokens, heads, head_dim]; cos and sin are [tokens, rot_dim / 2];
// only the first rot_dim values of each head rotate.
//
//   RopeCosSin(p, positions, tokens, cos, sin);
//   ApplyRope(p, cos, sin, q, tokens, heads);
#pragma once

#include <cstdint>

#include "kernels/common/rope_tables.h"

namespace kvfleet::kernels {

void ApplyRope(const RopeParams& p, const float* cos, const float* sin, float* x, int64_t tokens, int64_t heads);

}  // namespace kvfleet::kernels
