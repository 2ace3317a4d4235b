// Q5_0: blocks of 32 values: an f16 scale d, 4 bytes of fifth bits (bit i
// of the little-endian word is element i's) and 16 bytes of low nibbles
// laid out as Q4_0's; value = (q − 16) · d. ggml's reference quantizer
// (quantize_row_q5_0_ref).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ5_0 {
  uint16_t d;      // f16 scale
  uint8_t qh[4];   // bit i of this little-endian word is the fifth bit of element i
  uint8_t qs[16];  // low four bits: element i in the low nibble of qs[i], i+16 in the high one
};
#pragma pack(pop)
static_assert(sizeof(BlockQ5_0) == Traits(DType::kQ5_0).block_bytes);

namespace formats {

// The 32 five-bit values of a Q5_0 or Q5_1 block (the same qh and qs),
// less `offset`, as floats.
template <class Block>
inline __attribute__((always_inline)) Block32 FiveBitValues(const Block& q, float offset) {
  uint32_t qh;
  std::memcpy(&qh, q.qh, sizeof(qh));
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_or_si128(_mm_and_si128(raw, nibble), FifthBits(qh & 0xffff));
  const __m128i hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(raw, 4), nibble), FifthBits(qh >> 16));
  return U8x32ToFloat(lo, hi, offset);
}

template <class Block>
Q8SourceBlock UnpackFiveBits(const Block& q) {
  Q8SourceBlock s;
  for (int e = 0; e < 32; ++e) s.u[e] = static_cast<uint8_t>(Nibble(q.qs, e) | FifthBit(q.qh, e) << 4);
  s.d = q.d;
  return s;
}

}  // namespace formats

template <>
struct CpuFormat<DType::kQ5_0> {
  using Block = BlockQ5_0;

  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const Block*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      const Block& q = row_[b];
      const Block32 v = formats::FiveBitValues(q, 16.0f);
      const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
      return {_mm256_mul_ps(d, v.v0), _mm256_mul_ps(d, v.v1), _mm256_mul_ps(d, v.v2), _mm256_mul_ps(d, v.v3)};
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
      const float d = max / -16.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      b[i].d = FloatToHalf(d);
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
        const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
        b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
        qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
      }
      std::memcpy(b[i].qh, &qh, sizeof(qh));
    }
  }

  static constexpr Q8PanelLayout kPanels{.low_bits = 4, .high_bits = 1, .zero = 16, .block_bytes = 176};
  static_assert(kPanels.block_bytes == 8 * sizeof(Block));

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    return formats::UnpackFiveBits(reinterpret_cast<const Block*>(row)[b]);
  }
};

}  // namespace kvfleet::kernels
