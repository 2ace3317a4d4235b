#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace kvfleet::kernels {

void ApplyRope(const RopeParams& p, float* x, const int32_t* positions, int64_t tokens, int64_t heads) {
  const int64_t half = p.rot_dim / 2;
  std::vector<float> cos_t(half), sin_t(half);
  for (int64_t t = 0; t < tokens; ++t) {
    // Angles in double so the table does not depend on accumulated rounding.
    const double pos = static_cast<double>(positions[t]) * p.position_scale;
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = std::pow(static_cast<double>(p.theta_base), -2.0 * static_cast<double>(i) / p.rot_dim);
      if (p.freq_factors != nullptr) inv_freq /= p.freq_factors[i];
      const double angle = pos * inv_freq;
      cos_t[i] = static_cast<float>(std::cos(angle));
      sin_t[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * p.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = p.mode == RopeMode::kAdjacent ? 2 * i : i;
        const int64_t b = p.mode == RopeMode::kAdjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cos_t[i] - x1 * sin_t[i];
        v[b] = x0 * sin_t[i] + x1 * cos_t[i];
      }
    }
  }
}

}  // namespace kvfleet::kernels
