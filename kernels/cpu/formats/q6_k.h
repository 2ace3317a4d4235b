// Q6_K: super-blocks of 256 values: 128 bytes of low nibbles (two halves of
// 128 values: 64 low nibbles, 64 high nibbles each), 64 bytes of high
// 2-bit pairs (two halves: 32 bytes, four 2-bit fields each), 16 int8
// scales (one per 16 values) and an f16 d; value = (d · scale) · (q − 32).
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ6_K {
  uint8_t ql[128];    // low four bits (two halves of 128 values: 64 low nibbles, 64 high nibbles each)
  uint8_t qh[64];     // high two bits (two halves: 32 bytes, four 2-bit fields each)
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // f16 scale of the scales
};
#pragma pack(pop)
static_assert(sizeof(BlockQ6_K) == Traits(DType::kQ6_K).block_bytes);

template <>
struct CpuFormat<DType::kQ6_K> {
  using Block = BlockQ6_K;

  static void DecodeScales(const uint8_t* super, formats::SubBlockScales& s) {
    const Block& q = *reinterpret_cast<const Block*>(super);
    const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q.scales));
    _mm256_storeu_ps(s.scale, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_storeu_ps(s.scale + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
  }

  static inline __attribute__((always_inline)) Block32 Load(const uint8_t* super, int j,
                                                            const formats::SubBlockScales& s) {
    const int half = j / 4, quarter = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 64 * half + 32 * (quarter % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 128 + 32 * half));
    const __m256i low = _mm256_and_si256(quarter < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
    const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    const Block32 v = formats::U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 32.0f);
    const __m256 d0 = _mm256_set1_ps(s.scale[2 * j]), d1 = _mm256_set1_ps(s.scale[2 * j + 1]);
    return {_mm256_mul_ps(d0, v.v0), _mm256_mul_ps(d0, v.v1), _mm256_mul_ps(d1, v.v2), _mm256_mul_ps(d1, v.v3)};
  }

  using Reader = formats::SuperBlockReader<CpuFormat, sizeof(Block)>;

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    using formats::RoundClamp;
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
      float scale[16];
      const float max_scale = formats::SymmetricScales16(x, 31.0f, scale);
      b[i].d = FloatToHalf(max_scale / 127.0f);
      const float d = HalfToFloat(b[i].d);
      std::memset(b[i].ql, 0, sizeof(b[i].ql));
      std::memset(b[i].qh, 0, sizeof(b[i].qh));
      for (int g = 0; g < 16; ++g) {
        const int sc = d > 0.0f ? RoundClamp(scale[g] / d, -128, 127) : 0;
        b[i].scales[g] = static_cast<int8_t>(sc);
        const float dd = d * static_cast<float>(sc);
        for (int l = 0; l < 16; ++l) {
          const int e = 16 * g + l, half = e / 128, r = e % 128;
          const int q = (dd != 0.0f ? RoundClamp(x[e] / dd, -32, 31) : 0) + 32;
          b[i].ql[64 * half + r % 64] |= static_cast<uint8_t>((q & 0x0f) << (4 * (r / 64)));
          b[i].qh[32 * half + r % 32] |= static_cast<uint8_t>(((q >> 4) & 3) << (2 * (r / 32)));
        }
      }
    }
  }

  static constexpr Q8PanelLayout kPanels{.low_bits = 4,
                                         .high_bits = 2,
                                         .halves = 2,
                                         .zero = 32,
                                         .super = true,
                                         .block_bytes = 208,
                                         .header_bytes = 16,
                                         .scales = Q8Scales::kSigned8};

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b / 8];
    const int j = static_cast<int>(b % 8);
    Q8SourceBlock s;
    for (int l = 0; l < 32; ++l) {
      const int e = 32 * j + l, half = e / 128, r = e % 128;
      const int low = (q.ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0F;
      const int high = (q.qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
      s.u[l] = static_cast<uint8_t>(low | high << 4);
    }
    s.d = q.d;
    for (int h = 0; h < 2; ++h) s.scale[h] = static_cast<uint8_t>(q.scales[2 * j + h]);
    return s;
  }
};

}  // namespace kvfleet::kernels
