// Dequantization of one 32-element block of a weight row into four AVX2
// registers. This is the single definition of every format's values: the
// row dequantizer and the fused matmul both read rows through RowBlocks, so
// the two paths see bit-identical weights. A K-quant's block b is sub-block
// b % 8 of super-block b / 8 (its 32 values share one scale, or two for
// Q2_K, Q3_K and Q6_K).
//
// Each value is the float arithmetic of the gguf package's numpy
// dequantization, in its order (a scale product rounded before it
// multiplies q, a min subtracted after): bit for bit, as
// tests/reference/dequant_reference.py checks on every block of the real
// model files.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/float16.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {

struct Block32 {
  __m256 v0, v1, v2, v3;  // elements 0–7, 8–15, 16–23, 24–31
};

namespace internal {

inline __m256 U8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
inline __m256 I8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }
inline __m256 Bf16x8ToFloat(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline __m256 F16x8ToFloat(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 16 bits → 16 bytes of 0x10 (bit set) or 0: Q5_0's fifth bits, in place.
inline __m128i FifthBits(uint32_t bits16) {
  const __m128i spread = _mm_shuffle_epi8(_mm_set1_epi16(static_cast<int16_t>(bits16)),
                                          _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i mask = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(spread, mask), mask), _mm_set1_epi8(0x10));
}

// 32 unsigned bytes as four registers of floats, each minus `offset` (exact).
inline Block32 U8x32ToFloat(__m128i lo, __m128i hi, float offset) {
  const __m256 off = _mm256_set1_ps(offset);
  return {_mm256_sub_ps(U8x8ToFloat(lo), off), _mm256_sub_ps(U8x8ToFloat(_mm_srli_si128(lo, 8)), off),
          _mm256_sub_ps(U8x8ToFloat(hi), off), _mm256_sub_ps(U8x8ToFloat(_mm_srli_si128(hi, 8)), off)};
}

}  // namespace internal

// Block `b` of a row stored as T, a type whose blocks are 32 values.
// Always inlined: called out of line, its four registers go through
// memory (a K-quant decode ran 2.6× slower that way).
template <DType T>
inline __attribute__((always_inline)) Block32 LoadBlock32(const uint8_t* row, int64_t b) {
  using namespace internal;
  static_assert(!IsKQuant(T), "K-quant rows are read through RowBlocks");
  if constexpr (T == DType::kF32) {
    const float* p = reinterpret_cast<const float*>(row) + 32 * b;
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24)};
  } else if constexpr (T == DType::kF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + 32 * b;
    return {F16x8ToFloat(p), F16x8ToFloat(p + 8), F16x8ToFloat(p + 16), F16x8ToFloat(p + 24)};
  } else if constexpr (T == DType::kBF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + 32 * b;
    return {Bf16x8ToFloat(p), Bf16x8ToFloat(p + 8), Bf16x8ToFloat(p + 16), Bf16x8ToFloat(p + 24)};
  } else if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1) {
    // Q5_1's d, m come before the same qh and qs as Q5_0's d.
    using Block = std::conditional_t<T == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    const Block& q = reinterpret_cast<const Block*>(row)[b];
    uint32_t qh;
    std::memcpy(&qh, q.qh, sizeof(qh));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs));
    const __m128i nibble = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_or_si128(_mm_and_si128(raw, nibble), FifthBits(qh & 0xffff));
    const __m128i hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(raw, 4), nibble), FifthBits(qh >> 16));
    const Block32 v = U8x32ToFloat(lo, hi, T == DType::kQ5_0 ? 16.0f : 0.0f);
    const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
    if constexpr (T == DType::kQ5_0) {
      return {_mm256_mul_ps(d, v.v0), _mm256_mul_ps(d, v.v1), _mm256_mul_ps(d, v.v2), _mm256_mul_ps(d, v.v3)};
    } else {
      // q · d + m fused: q · d is exact (11 × 5 bits), so this is the gguf package's multiply-then-add.
      const __m256 m = _mm256_set1_ps(HalfToFloat(q.m));
      return {_mm256_fmadd_ps(v.v0, d, m), _mm256_fmadd_ps(v.v1, d, m), _mm256_fmadd_ps(v.v2, d, m),
              _mm256_fmadd_ps(v.v3, d, m)};
    }
  } else if constexpr (T == DType::kQ8_0) {
    const BlockQ8_0& q = reinterpret_cast<const BlockQ8_0*>(row)[b];
    const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.qs));
    const __m128i lo = _mm256_castsi256_si128(raw), hi = _mm256_extracti128_si256(raw, 1);
    return {_mm256_mul_ps(I8x8ToFloat(lo), d), _mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(lo, 8)), d),
            _mm256_mul_ps(I8x8ToFloat(hi), d), _mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(hi, 8)), d)};
  } else {
    // Q4_0 and Q4_1: element i in the low nibble of qs[i], element i+16 in the high one.
    const uint8_t* qs;
    __m256 d, m;
    if constexpr (T == DType::kQ4_0) {
      const BlockQ4_0& q = reinterpret_cast<const BlockQ4_0*>(row)[b];
      qs = q.qs;
      d = _mm256_set1_ps(HalfToFloat(q.d));
    } else {
      const BlockQ4_1& q = reinterpret_cast<const BlockQ4_1*>(row)[b];
      qs = q.qs;
      d = _mm256_set1_ps(HalfToFloat(q.d));
      m = _mm256_set1_ps(HalfToFloat(q.m));
    }
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    const __m256 q0 = U8x8ToFloat(lo), q1 = U8x8ToFloat(_mm_srli_si128(lo, 8));
    const __m256 q2 = U8x8ToFloat(hi), q3 = U8x8ToFloat(_mm_srli_si128(hi, 8));
    if constexpr (T == DType::kQ4_0) {
      const __m256 eight = _mm256_set1_ps(8.0f);
      return {_mm256_mul_ps(_mm256_sub_ps(q0, eight), d), _mm256_mul_ps(_mm256_sub_ps(q1, eight), d),
              _mm256_mul_ps(_mm256_sub_ps(q2, eight), d), _mm256_mul_ps(_mm256_sub_ps(q3, eight), d)};
    } else {
      // q · d + m with one rounding (fused): one instruction fewer per 8 values.
      return {_mm256_fmadd_ps(q0, d, m), _mm256_fmadd_ps(q1, d, m), _mm256_fmadd_ps(q2, d, m),
              _mm256_fmadd_ps(q3, d, m)};
    }
  }
}

// The blocks of one row, read in order 0, 1, 2, …: a K-quant's sub-block
// scales are decoded once per super-block (into float32: d · scale, and
// dmin · min), not once per block, then each block is its values times
// them. The only way the kernels read a row.
//
//   RowBlocks<DType::kQ4_K> blocks(row);
//   for (int64_t b = 0; b < k / 32; ++b) Block32 v = blocks.Next(b);
template <DType T>
class RowBlocks {
 public:
  explicit RowBlocks(const uint8_t* row) : row_(row) {}

  inline __attribute__((always_inline)) Block32 Next(int64_t b) {
    if constexpr (!IsKQuant(T)) {
      return LoadBlock32<T>(row_, b);
    } else {
      using namespace internal;
      const int j = static_cast<int>(b % 8);
      if (j == 0) DecodeScales(row_ + (b / 8) * Traits(T).block_bytes);
      if constexpr (T == DType::kQ2_K || T == DType::kQ3_K) {
        // Two bits of qs[32·(j / 4) + l] at 2·(j % 4); Q3_K: a third from hmask[l], bit j.
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_ + kQsOffset + 32 * (j / 4)));
        __m256i q = _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(2 * (j % 4))), _mm256_set1_epi8(3));
        if constexpr (T == DType::kQ3_K) {
          const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_));
          const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
          q = _mm256_or_si256(q, _mm256_slli_epi16(high, 2));
        }
        const Block32 v = U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1),
                                       T == DType::kQ3_K ? 4.0f : 0.0f);
        const __m256 d0 = _mm256_set1_ps(scale_[2 * j]), d1 = _mm256_set1_ps(scale_[2 * j + 1]);
        if constexpr (T == DType::kQ3_K) {
          return {_mm256_mul_ps(d0, v.v0), _mm256_mul_ps(d0, v.v1), _mm256_mul_ps(d1, v.v2), _mm256_mul_ps(d1, v.v3)};
        } else {
          // (d · scale) · q is exact (15 + 2 bits), so one fused rounding of
          // it less dmin · min is the gguf package's mul-then-subtract.
          const __m256 m0 = _mm256_set1_ps(min_[2 * j]), m1 = _mm256_set1_ps(min_[2 * j + 1]);
          return {_mm256_fmsub_ps(d0, v.v0, m0), _mm256_fmsub_ps(d0, v.v1, m0), _mm256_fmsub_ps(d1, v.v2, m1),
                  _mm256_fmsub_ps(d1, v.v3, m1)};
        }
      } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
        // Nibbles of qs[32·(j / 2) + l], low for j even; Q5_K: a fifth bit from qh[l], bit j.
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_ + kQsOffset + 32 * (j / 2)));
        __m256i q = _mm256_and_si256(j % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
        if constexpr (T == DType::kQ5_K) {
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_ + 16));
          const __m256i fifth = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
          q = _mm256_or_si256(q, _mm256_slli_epi16(fifth, 4));
        }
        const Block32 v = U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 0.0f);
        // (d · scale) · q is exact (17 + 5 bits): one fused rounding of it
        // less dmin · min is the gguf package's mul-then-subtract.
        const __m256 d = _mm256_set1_ps(scale_[j]), m = _mm256_set1_ps(min_[j]);
        return {_mm256_fmsub_ps(d, v.v0, m), _mm256_fmsub_ps(d, v.v1, m), _mm256_fmsub_ps(d, v.v2, m),
                _mm256_fmsub_ps(d, v.v3, m)};
      } else {  // Q6_K
        const int half = j / 4, quarter = j % 4;
        const __m256i ql =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_ + 64 * half + 32 * (quarter % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_ + 128 + 32 * half));
        const __m256i low = _mm256_and_si256(quarter < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
        const __m256i high =
            _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
        const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
        const Block32 v = U8x32ToFloat(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), 32.0f);
        const __m256 d0 = _mm256_set1_ps(scale_[2 * j]), d1 = _mm256_set1_ps(scale_[2 * j + 1]);
        return {_mm256_mul_ps(d0, v.v0), _mm256_mul_ps(d0, v.v1), _mm256_mul_ps(d1, v.v2), _mm256_mul_ps(d1, v.v3)};
      }
    }
  }

 private:
  // Where the values start in a super-block.
  static constexpr int kQsOffset = T == DType::kQ2_K ? 16 : T == DType::kQ3_K ? 32 : T == DType::kQ5_K ? 48 : 16;

  // The float scale (and min) of each sub-block of 32 (Q4_K, Q5_K) or 16
  // values (Q2_K, Q3_K, Q6_K), as the gguf package computes them.
  void DecodeScales(const uint8_t* super) {
    super_ = super;
    if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      // The 8 six-bit scales and mins in two 64-bit words (Q4KScaleMin's
      // layout, all at once): bytes 0-3 hold scale 0-3 in their low six
      // bits and the top two bits of scale 4-7; bytes 4-7 the same for the
      // mins; bytes 8-11 the low four bits of scale 4-7 and min 4-7.
      const BlockQ4_K& s = *reinterpret_cast<const BlockQ4_K*>(super);  // d, dmin, scales: the same bytes in Q5_K
      uint32_t w[3];
      std::memcpy(w, s.scales, sizeof(w));
      const uint64_t scales = (w[0] & 0x3f3f3f3fu) |
                              static_cast<uint64_t>((w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u)) << 32;
      const uint64_t mins = (w[1] & 0x3f3f3f3fu) |
                            static_cast<uint64_t>(((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u)) << 32;
      StoreProducts(HalfToFloat(s.d), scales, scale_);
      StoreProducts(HalfToFloat(s.dmin), mins, min_);
    } else if constexpr (T == DType::kQ2_K) {
      const BlockQ2_K& s = *reinterpret_cast<const BlockQ2_K*>(super);
      const float d = HalfToFloat(s.d), dmin = HalfToFloat(s.dmin);
      for (int g = 0; g < 16; ++g) {
        scale_[g] = d * static_cast<float>(s.scales[g] & 0x0f);
        min_[g] = dmin * static_cast<float>(s.scales[g] >> 4);
      }
    } else if constexpr (T == DType::kQ3_K) {
      const BlockQ3_K& s = *reinterpret_cast<const BlockQ3_K*>(super);
      const float d = HalfToFloat(s.d);
      for (int g = 0; g < 16; ++g) scale_[g] = d * static_cast<float>(Q3KScale(s.scales, g));
    } else if constexpr (T == DType::kQ6_K) {
      const BlockQ6_K& s = *reinterpret_cast<const BlockQ6_K*>(super);
      const __m256 d = _mm256_set1_ps(HalfToFloat(s.d));
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.scales));
      _mm256_storeu_ps(scale_, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
      _mm256_storeu_ps(scale_ + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
    }
  }

  // out[i] = d · float(byte i of factors), i = 0..7: the scalar products, eight at once.
  static void StoreProducts(float d, uint64_t factors, float* out) {
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(factors))));
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(d), f));
  }

  const uint8_t* row_;
  const uint8_t* super_ = nullptr;
  float scale_[16];
  float min_[16];
};

}  // namespace kvfleet::kernels
