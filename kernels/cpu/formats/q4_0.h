// Q4_0: blocks of 32 values: an f16 scale d and 16 bytes of nibbles
// (element i in the low nibble of byte i, element i + 16 in the high one);
// value = (q − 8) · d. ggml's reference quantizer (quantize_row_q4_0_ref).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // element i in the low nibble of qs[i], element i+16 in the high one
};
#pragma pack(pop)
static_assert(sizeof(BlockQ4_0) == Traits(DType::kQ4_0).block_bytes);

template <>
struct CpuFormat<DType::kQ4_0> {
  using Block = BlockQ4_0;

  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const Block*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      using formats::U8x8ToFloat;
      const Block& q = row_[b];
      const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs));
      const __m128i mask = _mm_set1_epi8(0x0f);
      const __m128i lo = _mm_and_si128(raw, mask);
      const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
      const __m256 q0 = U8x8ToFloat(lo), q1 = U8x8ToFloat(_mm_srli_si128(lo, 8));
      const __m256 q2 = U8x8ToFloat(hi), q3 = U8x8ToFloat(_mm_srli_si128(hi, 8));
      const __m256 eight = _mm256_set1_ps(8.0f);
      return {_mm256_mul_ps(_mm256_sub_ps(q0, eight), d), _mm256_mul_ps(_mm256_sub_ps(q1, eight), d),
              _mm256_mul_ps(_mm256_sub_ps(q2, eight), d), _mm256_mul_ps(_mm256_sub_ps(q3, eight), d)};
    }

   private:
    const Block* row_;
  };

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
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

  static constexpr Q8PanelLayout kPanels{.low_bits = 4, .zero = 8, .block_bytes = 144};
  static_assert(kPanels.block_bytes == 8 * sizeof(Block));

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b];
    Q8SourceBlock s;
    for (int e = 0; e < 32; ++e) s.u[e] = formats::Nibble(q.qs, e);
    s.d = q.d;
    return s;
  }
};

}  // namespace kvfleet::kernels
