// Q4_K: super-blocks of 256 values in 8 sub-blocks of 32: an f16 d and
// dmin, 12 bytes of 6-bit scales and mins (one pair per sub-block, packed
// as ggml's get_scale_min_k4 reads them) and 128 bytes of nibbles
// (sub-block j: the low (j even) or high (j odd) nibbles of qs[32·(j/2) …]);
// value = (d · scale_j) · q − (dmin · min_j). Q5_K (q5_k.h) shares the
// header.
#pragma once

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ4_K {
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
  uint8_t scales[12];  // 8 × (6-bit scale, 6-bit min), packed as ggml's get_scale_min_k4 reads them
  uint8_t qs[128];     // sub-block j: the low (j even) or high (j odd) nibbles of qs[32·(j/2) ...]
};
#pragma pack(pop)
static_assert(sizeof(BlockQ4_K) == Traits(DType::kQ4_K).block_bytes);

// Sub-block j's 6-bit scale and min of a Q4_K (or Q5_K) super-block.
inline void Q4KScaleMin(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

namespace formats {

// out[i] = d · float(byte i of factors), i = 0..7: the scalar products, eight at once.
inline void StoreProducts(float d, uint64_t factors, float* out) {
  const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(factors))));
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(d), f));
}

// The 8 float scales and mins of a Q4_K or Q5_K super-block (the same
// first 16 bytes): the six-bit fields in two 64-bit words (Q4KScaleMin's
// layout, all at once): bytes 0-3 hold scale 0-3 in their low six bits and
// the top two bits of scale 4-7; bytes 4-7 the same for the mins; bytes
// 8-11 the low four bits of scale 4-7 and min 4-7.
inline void DecodeQ4KScales(const uint8_t* super, SubBlockScales& s) {
  const BlockQ4_K& q = *reinterpret_cast<const BlockQ4_K*>(super);
  uint32_t w[3];
  std::memcpy(w, q.scales, sizeof(w));
  const uint64_t scales =
      (w[0] & 0x3f3f3f3fu) | static_cast<uint64_t>((w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u)) << 32;
  const uint64_t mins =
      (w[1] & 0x3f3f3f3fu) | static_cast<uint64_t>(((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u)) << 32;
  StoreProducts(HalfToFloat(q.d), scales, s.scale);
  StoreProducts(HalfToFloat(q.dmin), mins, s.min);
}

// Q4_K's and Q5_K's scales, mins and values (kLevels: 15 or 31) of one
// super-block, the values one byte each.
template <int kLevels>
void QuantizeWithMins(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* values) {
  float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    scale[j] = (hi - lo) / kLevels;
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  *d_out = FloatToHalf(max_scale / 63.0f);
  *dmin_out = FloatToHalf(max_min / 63.0f);
  const float d = HalfToFloat(*d_out), dmin = HalfToFloat(*dmin_out);
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0.0f ? RoundClamp(scale[j] / d, 0, 63) : 0;
    const int lm = dmin > 0.0f ? RoundClamp(min[j] / dmin, 0, 63) : 0;
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls);
      scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float dd = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
    for (int l = 0; l < 32; ++l) {
      values[32 * j + l] = static_cast<uint8_t>(dd > 0.0f ? RoundClamp((x[32 * j + l] + dm) / dd, 0, kLevels) : 0);
    }
  }
}

// Q4_K's and Q5_K's unpacked low four bits of sub-block j and their header.
inline Q8SourceBlock UnpackQ4KHeader(const BlockQ4_K& q4, const uint8_t* qs, int j) {
  Q8SourceBlock s;
  for (int l = 0; l < 32; ++l) s.u[l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
  s.d = q4.d;
  s.dmin = q4.dmin;
  Q4KScaleMin(q4.scales, j, &s.scale[0], &s.min[0]);
  s.scale[1] = s.scale[0];
  s.min[1] = s.min[0];
  return s;
}

// The panels of Q4_K and Q5_K (a fifth bit above the nibbles).
constexpr Q8PanelLayout Q4KPanels(int high_bits, int64_t block_bytes) {
  return {.low_bits = 4,
          .high_bits = high_bits,
          .has_min = true,
          .super = true,
          .block_bytes = block_bytes,
          .header_bytes = 32,
          .scales = Q8Scales::kScaleAndMin8};
}

}  // namespace formats

template <>
struct CpuFormat<DType::kQ4_K> {
  using Block = BlockQ4_K;

  static void DecodeScales(const uint8_t* super, formats::SubBlockScales& s) { formats::DecodeQ4KScales(super, s); }

  // Sub-block j: nibbles of qs[32·(j / 2) + l], low for j even.
  static inline __attribute__((always_inline)) Block32 Load(const uint8_t* super, int j,
                                                            const formats::SubBlockScales& s) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 16 + 32 * (j / 2)));
    const __m256i q = _mm256_and_si256(j % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
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
      formats::QuantizeWithMins<15>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
      std::memset(b[i].qs, 0, sizeof(b[i].qs));
      for (int e = 0; e < 256; ++e) {
        b[i].qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(q[e] << (4 * ((e / 32) % 2)));
      }
    }
  }

  static constexpr Q8PanelLayout kPanels = formats::Q4KPanels(0, 144);

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b / 8];
    return formats::UnpackQ4KHeader(q, q.qs, static_cast<int>(b % 8));
  }
};

}  // namespace kvfleet::kernels
