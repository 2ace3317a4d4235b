// Q2_K: super-blocks of 256 values: 16 bytes of a 4-bit scale (low nibble)
// and 4-bit min (high nibble) per 16 values, 64 bytes of 2-bit values
// (value e = 128h + 32s + l: bits 2s, 2s+1 of qs[32h + l]), an f16 d and
// an f16 dmin; value = (d · scale) · q − (dmin · min).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ2_K {
  uint8_t scales[16];  // per 16 values: scale in the low nibble, min in the high one
  uint8_t qs[64];      // value e = 128h + 32s + l: bits 2s, 2s+1 of qs[32h + l]
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
};
#pragma pack(pop)
static_assert(sizeof(BlockQ2_K) == Traits(DType::kQ2_K).block_bytes);

template <>
struct CpuFormat<DType::kQ2_K> {
  using Block = BlockQ2_K;

  static void DecodeScales(const uint8_t* super, formats::SubBlockScales& s) {
    const Block& q = *reinterpret_cast<const Block*>(super);
    const float d = HalfToFloat(q.d), dmin = HalfToFloat(q.dmin);
    for (int g = 0; g < 16; ++g) {
      s.scale[g] = d * static_cast<float>(q.scales[g] & 0x0f);
      s.min[g] = dmin * static_cast<float>(q.scales[g] >> 4);
    }
  }

  // Sub-block j: two bits of qs[32·(j / 4) + l] at 2·(j % 4).
  static inline __attribute__((always_inline)) Block32 Load(const uint8_t* super, int j,
                                                            const formats::SubBlockScales& s) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 16 + 32 * (j / 4)));
    const __m256i q = _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(2 * (j % 4))), _mm256_set1_epi8(3));
    const Block32 v = formats::U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 0.0f);
    const __m256 d0 = _mm256_set1_ps(s.scale[2 * j]), d1 = _mm256_set1_ps(s.scale[2 * j + 1]);
    // (d · scale) · q is exact (15 + 2 bits), so one fused rounding of it
    // less dmin · min is the gguf package's mul-then-subtract.
    const __m256 m0 = _mm256_set1_ps(s.min[2 * j]), m1 = _mm256_set1_ps(s.min[2 * j + 1]);
    return {_mm256_fmsub_ps(d0, v.v0, m0), _mm256_fmsub_ps(d0, v.v1, m0), _mm256_fmsub_ps(d1, v.v2, m1),
            _mm256_fmsub_ps(d1, v.v3, m1)};
  }

  using Reader = formats::SuperBlockReader<CpuFormat, sizeof(Block)>;

  // Per 16 values: a 4-bit scale and a 4-bit min against the super-block's
  // d and dmin; values in 0..3.
  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    using formats::RoundClamp;
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
      float scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
      for (int g = 0; g < 16; ++g) {
        float lo = 0.0f, hi = 0.0f;
        for (int l = 0; l < 16; ++l) {
          lo = std::min(lo, x[16 * g + l]);
          hi = std::max(hi, x[16 * g + l]);
        }
        scale[g] = (hi - lo) / 3.0f;
        min[g] = -lo;
        max_scale = std::max(max_scale, scale[g]);
        max_min = std::max(max_min, min[g]);
      }
      b[i].d = FloatToHalf(max_scale / 15.0f);
      b[i].dmin = FloatToHalf(max_min / 15.0f);
      const float d = HalfToFloat(b[i].d), dmin = HalfToFloat(b[i].dmin);
      std::memset(b[i].qs, 0, sizeof(b[i].qs));
      for (int g = 0; g < 16; ++g) {
        // The scale rounded up, so the range still covers the values.
        const int ls = d > 0.0f ? std::clamp(static_cast<int>(std::ceil(scale[g] / d)), 0, 15) : 0;
        const int lm = dmin > 0.0f ? RoundClamp(min[g] / dmin, 0, 15) : 0;
        b[i].scales[g] = static_cast<uint8_t>(ls | (lm << 4));
        const float dd = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
        for (int l = 0; l < 16; ++l) {
          const int e = 16 * g + l;
          const int q = dd > 0.0f ? RoundClamp((x[e] + dm) / dd, 0, 3) : 0;
          b[i].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * ((e % 128) / 32)));
        }
      }
    }
  }

  static constexpr Q8PanelLayout kPanels{.low_bits = 2,
                                         .halves = 2,
                                         .has_min = true,
                                         .super = true,
                                         .block_bytes = 80,
                                         .header_bytes = 32,
                                         .scales = Q8Scales::kPacked4};

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b / 8];
    const int j = static_cast<int>(b % 8);
    Q8SourceBlock s;
    for (int l = 0; l < 32; ++l) s.u[l] = (q.qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
    s.d = q.d;
    s.dmin = q.dmin;
    for (int h = 0; h < 2; ++h) {
      s.scale[h] = q.scales[2 * j + h] & 0x0F;
      s.min[h] = q.scales[2 * j + h] >> 4;
    }
    return s;
  }
};

}  // namespace kvfleet::kernels
