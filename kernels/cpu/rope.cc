#include "kernels/cpu/rope.h"

#include <cmath>

namespace kvfleet::kernels {

void RopeCosSin(const RopeParams& p, const int32_t* positions, int64_t tokens, float* cos, float* sin) {
  const int64_t half = p.rot_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const double pos = static_cast<double>(positions[t]) * p.position_scale;
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = std::pow(static_cast<double>(p.theta_base), -2.0 * static_cast<double>(i) / p.rot_dim);
      if (p.freq_factors != nullptr) inv_freq /= p.freq_factors[i];
      const double angle = pos * inv_freq;
      cos[t * half + i] = static_cast<float>(std::cos(angle));
      sin[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void ApplyRope(const RopeParams& p, const float* cos, const float* sin, float* x, int64_t tokens, int64_t heads) {
  const int64_t half = p.rot_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * p.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = p.mode == RopeMode::kAdjacent ? 2 * i : i;
        const int64_t b = p.mode == RopeMode::kAdjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

}  // namespace kvfleet::kernels
