#include "kernels/cpu/rope.h"

#include <cmath>

namespace kvfleet::kernels {

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
