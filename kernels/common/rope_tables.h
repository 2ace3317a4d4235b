// The angles of rotary position embedding, defined once for every backend:
// the CPU backend computes them per batch, the CUDA backend once for every
// position of the context, from this one function, so both rotate by
// bit-identical factors.
//
// Two pairings exist in the wild: kAdjacent rotates (x[2i], x[2i+1]) (the
// layout of Llama-family GGUF files, whose converter permuted Q and K for
// it) and kHalves rotates (x[i], x[i + rot_dim/2]) as GPT-NeoX, Qwen, Gemma
// and every Hugging Face checkpoint do.
//
// cos and sin are [tokens, rot_dim / 2].
//
//   RopeParams p{.mode = RopeMode::kAdjacent, .head_dim = 64, .rot_dim = 64, .theta_base = 1e5f};
//   RopeCosSin(p, positions, tokens, cos, sin);
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
  double magnitude = 1.0;               // cos and sin × this (LongRoPE's, YaRN's attention factor)
};

// Angles, and their cosine and sine times the magnitude, are computed in
// double so they do not depend on accumulated rounding, then stored as float.
void RopeCosSin(const RopeParams& p, const int32_t* positions, int64_t tokens, float* cos, float* sin);

}  // namespace kvfleet::kernels
