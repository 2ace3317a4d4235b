#include "kernels/cpu/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/float16.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {
namespace {

// Eight unsigned bytes → eight floats.
inline __m256 U8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
inline __m256 I8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }

// The 32 nibbles of a Q4 block as two vectors of 16 bytes: elements 0..15, 16..31.
inline void UnpackNibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  lo = _mm_and_si128(raw, mask);
  hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
}

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(b[i].d));
    for (int j = 0; j < 4; ++j) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * j));
      _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(I8x8ToFloat(q), d));
    }
  }
}

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  const __m256 eight = _mm256_set1_ps(8.0f);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(b[i].d));
    __m128i lo, hi;
    UnpackNibbles(b[i].qs, lo, hi);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int j = 0; j < 4; ++j) {
      _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_sub_ps(U8x8ToFloat(parts[j]), eight), d));
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(b[i].d));
    const __m256 m = _mm256_set1_ps(HalfToFloat(b[i].m));
    __m128i lo, hi;
    UnpackNibbles(b[i].qs, lo, hi);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int j = 0; j < 4; ++j) {
      _mm256_storeu_ps(y + 8 * j, _mm256_add_ps(_mm256_mul_ps(U8x8ToFloat(parts[j]), d), m));
    }
  }
}

void DequantF16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = HalfToFloat(x[i]);
}

void DequantBf16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) y[i] = Bf16ToFloat(x[i]);
}

// ggml's reference quantizers (quantize_row_*_ref), restated.
void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    b[i].m = FloatToHalf(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: DequantF16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::kBF16: DequantBf16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::kQ8_0: DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, n / 32); return;
    case DType::kQ4_0: DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, n / 32); return;
    case DType::kQ4_1: DequantQ4_1(static_cast<const BlockQ4_1*>(src), dst, n / 32); return;
  }
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(src[i]);
      return;
    }
    case DType::kQ8_0: QuantQ8_0(src, static_cast<BlockQ8_0*>(dst), n / 32); return;
    case DType::kQ4_0: QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), n / 32); return;
    case DType::kQ4_1: QuantQ4_1(src, static_cast<BlockQ4_1*>(dst), n / 32); return;
  }
}

}  // namespace kvfleet::kernels
