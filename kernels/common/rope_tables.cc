#include "kernels/common/rope_tables.h"

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
      cos[t * half + i] = static_cast<float>(std::cos(angle) * p.magnitude);
      sin[t * half + i] = static_cast<float>(std::sin(angle) * p.magnitude);
    }
  }
}

}  // namespace kvfleet::kernels
