// Rotary position embedding applied in place to query or key heads, in two
// parts: the angles of a batch's positions (once per forward pass, shared by
// every layer's queries and keys), then the rotation.
//
// Two pairings exist in the wild: kAdjacent rotates (x[2i], x[2i+1]) — the
// layout of Llama-family GGUF files, whose converter permuted Q and K for it —
// and kHalves rotates (x[i], x[i + rot_dim/2]) as GPT-NeoX and Qwen2 do.
//
// Shapes: x is [tokens, heads, head_dim]; positions is [tokens]; cos and sin
// are [tokens, rot_dim / 2]; only the first rot_dim values of each head rotate.
//
// RopeCosSin is the one definition of the angles: the CPU backend calls it
// per batch, the CUDA backend once for every position of the context, so
// both rotate by bit-identical factors.
//
//   RopeParams p{.mode = RopeMode::kAdjacent, .head_dim = 64, .rot_dim = 64, .theta_base = 1e5f};
//   RopeCosSin(p, positions, tokens, cos, sin);
//   ApplyRope(p, cos, sin, q, tokens, heads);
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

enum class RopeMode { kAdjacent, kHalves };

struct RopeParams {
  RopeMode mode = RopeMode::kAdjacent;
  int64_t head_dim = 0;
  int64_t rot_dim = 0;
  float theta_base = 10000.0f;
  float position_scale = 1.0f;          // linear RoPE scaling: 1 / factor
  const float* freq_factors = nullptr;  // optional [rot_dim / 2]: frequencies are divided by these
};

// Angles are computed in double so they do not depend on accumulated
// rounding, then stored as float.
void RopeCosSin(const RopeParams& p, const int32_t* positions, int64_t tokens, float* cos, float* sin);

void ApplyRope(const RopeParams& p, const float* cos, const float* sin, float* x, int64_t tokens, int64_t heads);

}  // namespace kvfleet::kernels
