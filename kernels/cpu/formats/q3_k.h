// Q3_K: super-blocks of 256 values: 32 bytes of third bits (value e =
// 32i + l: bit i of hmask[l]), 64 bytes of low 2-bit values laid out as
// Q2_K's, 12 bytes of 6-bit scales (one per 16 values, stored + 32) and an
// f16 d; value = (d · (scale − 32)) · (q − 4).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ3_K {
  uint8_t hmask[32];   // value e = 32i + l: its third bit is bit i of hmask[l]
  uint8_t qs[64];      // low two bits, laid out as Q2_K's
  uint8_t scales[12];  // 16 × 6 bits (Q3KScale unpacks them), stored + 32
  uint16_t d;          // f16 scale of the scales
};
#pragma pack(pop)
static_assert(sizeof(BlockQ3_K) == Traits(DType::kQ3_K).block_bytes);

// Scale g (0..15) of a Q3_K super-block, signed: the low four bits are the
// low (g < 8) or high nibble of scales[g % 8], the top two bits field g / 4
// of scales[8 + g % 4].
inline int Q3KScale(const uint8_t* scales, int g) {
  const int low = (scales[g % 8] >> (4 * (g / 8))) & 0x0f;
  const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

template <>
struct CpuFormat<DType::kQ3_K> {
  using Block = BlockQ3_K;

  static void DecodeScales(const uint8_t* super, formats::SubBlockScales& s) {
    const Block& q = *reinterpret_cast<const Block*>(super);
    const float d = HalfToFloat(q.d);
    for (int g = 0; g < 16; ++g) s.scale[g] = d * static_cast<float>(Q3KScale(q.scales, g));
  }

  // Sub-block j: two bits of qs[32·(j / 4) + l] at 2·(j % 4), a third from hmask[l], bit j.
  static inline __attribute__((always_inline)) Block32 Load(const uint8_t* super, int j,
                                                            const formats::SubBlockScales& s) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 32 + 32 * (j / 4)));
    __m256i q = _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(2 * (j % 4))), _mm256_set1_epi8(3));
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    q = _mm256_or_si256(q, _mm256_slli_epi16(high, 2));
    const Block32 v = formats::U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 4.0f);
    const __m256 d0 = _mm256_set1_ps(s.scale[2 * j]), d1 = _mm256_set1_ps(s.scale[2 * j + 1]);
    return {_mm256_mul_ps(d0, v.v0), _mm256_mul_ps(d0, v.v1), _mm256_mul_ps(d1, v.v2), _mm256_mul_ps(d1, v.v3)};
  }

  using Reader = formats::SuperBlockReader<CpuFormat, sizeof(Block)>;

  // Per 16 values: a signed 6-bit scale against the super-block's d;
  // values in −4..3.
  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    using formats::RoundClamp;
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
      float scale[16];
      const float max_scale = formats::SymmetricScales16(x, 3.5f, scale);
      b[i].d = FloatToHalf(max_scale / 31.0f);
      const float d = HalfToFloat(b[i].d);
      std::memset(b[i].hmask, 0, sizeof(b[i].hmask));
      std::memset(b[i].qs, 0, sizeof(b[i].qs));
      std::memset(b[i].scales, 0, sizeof(b[i].scales));
      for (int g = 0; g < 16; ++g) {
        const int sc = d > 0.0f ? RoundClamp(scale[g] / d, -32, 31) : 0;
        const int stored = sc + 32;
        b[i].scales[g % 8] |= static_cast<uint8_t>((stored & 0x0f) << (4 * (g / 8)));
        b[i].scales[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
        const float dd = d * static_cast<float>(sc);
        for (int l = 0; l < 16; ++l) {
          const int e = 16 * g + l;
          const int u = (dd != 0.0f ? RoundClamp(x[e] / dd, -4, 3) : 0) + 4;
          b[i].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * ((e % 128) / 32)));
          b[i].hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
        }
      }
    }
  }

  static constexpr Q8PanelLayout kPanels{.low_bits = 2,
                                         .high_bits = 1,
                                         .halves = 2,
                                         .zero = 4,
                                         .super = true,
                                         .block_bytes = 112,
                                         .header_bytes = 16,
                                         .scales = Q8Scales::kSigned8};

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b / 8];
    const int j = static_cast<int>(b % 8);
    Q8SourceBlock s;
    for (int l = 0; l < 32; ++l) {
      s.u[l] = static_cast<uint8_t>(((q.qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3) | ((q.hmask[l] >> j) & 1) << 2);
    }
    s.d = q.d;
    for (int h = 0; h < 2; ++h) s.scale[h] = static_cast<uint8_t>(static_cast<int8_t>(Q3KScale(q.scales, 2 * j + h)));
    return s;
  }
};

}  // namespace kvfleet::kernels
