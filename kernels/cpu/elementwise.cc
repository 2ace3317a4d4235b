#include "kernels/cpu/elementwise.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {

void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float sum_sq = Dot8(xr, xr, static_cast<int>(n));
    const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * weight[i];
  }
}

void SumSquares(const float* x, int64_t rows, int64_t n, float* sums) {
  for (int64_t r = 0; r < rows; ++r) sums[r] = Dot8(x + r * n, x + r * n, static_cast<int>(n));
}

void ScaleByRms(const float* x, const float* sums, const float* weight, float* y, int64_t rows, int64_t n, float total,
                float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float scale = 1.0f / std::sqrt(sums[r] / total + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * weight[i];
  }
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void Silu(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    out[i] = v / (1.0f + std::exp(-v));
  }
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t count) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCubic = 0.044715f;
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + kCubic * (g * g * g));
    out[i] = ((0.5f * g) * (1.0f + std::tanh(inner))) * up[i];
  }
}

void Scale(float* x, int64_t count, float s) {
  for (int64_t i = 0; i < count; ++i) x[i] *= s;
}

void AddInPlace(float* y, const float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] += x[i];
}

void AddBias(float* y, const float* bias, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) AddInPlace(y + r * n, bias, n);
}

void GatherRows(const float* x, const int32_t* rows, int64_t count, int64_t n, float* out) {
  for (int64_t i = 0; i < count; ++i) std::memcpy(out + i * n, x + rows[i] * n, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace kvfleet::kernels
