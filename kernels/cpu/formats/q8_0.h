// Q8_0: blocks of 32 values: an f16 scale d and 32 signed bytes q;
// value = q · d. ggml's reference quantizer (quantize_row_q8_0_ref).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value = qs[i] · d
};
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == Traits(DType::kQ8_0).block_bytes);

template <>
struct CpuFormat<DType::kQ8_0> {
  using Block = BlockQ8_0;

  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const Block*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      using formats::I8x8ToFloat;
      const Block& q = row_[b];
      const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.qs));
      const __m128i lo = _mm256_castsi256_si128(raw), hi = _mm256_extracti128_si256(raw, 1);
      return {_mm256_mul_ps(I8x8ToFloat(lo), d), _mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(lo, 8)), d),
              _mm256_mul_ps(I8x8ToFloat(hi), d), _mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(hi, 8)), d)};
    }

   private:
    const Block* row_;
  };

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      b[i].d = FloatToHalf(d);
      for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
    }
  }

  // The panel block is exactly the bytes of 8 row blocks' values, then their d.
  static constexpr Q8PanelLayout kPanels{
      .low_bits = 8, .block_bytes = 272, .signed_values = true, .scales = Q8Scales::kHalf};
  static_assert(kPanels.block_bytes == 8 * sizeof(Block));

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b];
    Q8SourceBlock s;
    std::memcpy(s.u, q.qs, 32);
    s.d = q.d;
    return s;
  }
};

}  // namespace kvfleet::kernels
