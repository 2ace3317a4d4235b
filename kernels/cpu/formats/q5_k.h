// Q5_K: super-blocks of 256 values: Q4_K's header (d, dmin, 6-bit scales
// and mins per 32 values), 32 bytes of fifth bits (value e = 32i + l: bit
// i of qh[l]) and 128 bytes of low nibbles laid out as Q4_K's;
// value = (d · scale_j) · q − (dmin · min_j).
#pragma once

#include "kernels/cpu/formats/format_common.h"
#include "kernels/cpu/formats/q4_k.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ5_K {
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
  uint8_t scales[12];  // as Q4_K's
  uint8_t qh[32];      // value e = 32i + l: its fifth bit is bit i of qh[l]
  uint8_t qs[128];     // low four bits, laid out as Q4_K's
};
#pragma pack(pop)
static_assert(sizeof(BlockQ5_K) == Traits(DType::kQ5_K).block_bytes);

template <>
struct CpuFormat<DType::kQ5_K> {
  using Block = BlockQ5_K;

  static void DecodeScales(const uint8_t* super, formats::SubBlockScales& s) { formats::DecodeQ4KScales(super, s); }

  // Sub-block j: Q4_K's nibbles, a fifth bit from qh[l], bit j.
  static inline __attribute__((always_inline)) Block32 Load(const uint8_t* super, int j,
                                                            const formats::SubBlockScales& s) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 48 + 32 * (j / 2)));
    __m256i q = _mm256_and_si256(j % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 16));
    const __m256i fifth = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    q = _mm256_or_si256(q, _mm256_slli_epi16(fifth, 4));
    const Block32 v = formats::U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 0.0f);
    // (d · scale) · q is exact (17 + 5 bits): one fused rounding of it
    // less dmin · min is the gguf package's mul-then-subtract.
    const __m256 d = _mm256_set1_ps(s.scale[j]), m = _mm256_set1_ps(s.min[j]);
    return {_mm256_fmsub_ps(d, v.v0, m), _mm256_fmsub_ps(d, v.v1, m), _mm256_fmsub_ps(d, v.v2, m),
            _mm256_fmsub_ps(d, v.v3, m)};
  }

  using Reader = formats::SuperBlockReader<CpuFormat, sizeof(Block)>;

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
      uint8_t q[256];
      formats::QuantizeWithMins<31>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
      std::memset(b[i].qs, 0, sizeof(b[i].qs));
      std::memset(b[i].qh, 0, sizeof(b[i].qh));
      for (int e = 0; e < 256; ++e) {
        const int j = e / 32, l = e % 32;
        b[i].qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q[e] & 0x0f) << (4 * (j % 2)));
        b[i].qh[l] |= static_cast<uint8_t>((q[e] >> 4) << j);
      }
    }
  }

  static constexpr Q8PanelLayout kPanels = formats::Q4KPanels(1, 176);

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b / 8];
    const int j = static_cast<int>(b % 8);
    Q8SourceBlock s = formats::UnpackQ4KHeader(*reinterpret_cast<const BlockQ4_K*>(&q), q.qs, j);
    for (int l = 0; l < 32; ++l) s.u[l] = static_cast<uint8_t>(s.u[l] | ((q.qh[l] >> j) & 1) << 4);
    return s;
  }
};

}  // namespace kvfleet::kernels
