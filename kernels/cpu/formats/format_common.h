// What every weight format's CPU file (kernels/cpu/formats/<name>.h) is
// written against: CpuFormat<T>, the one specialization per type that
// holds its byte layout, the values of its blocks (Reader), its quantizer
// and its 8-bit panel layout; the 32-value register block every reader
// returns; and the AVX2 helpers the readers share.
//
// A format file defines
//   template <> struct CpuFormat<DType::kX> {
//     class Reader;  // Reader(row).Next(b): block b (32 values) of a row, b = 0, 1, 2, … in order
//     static void Quantize(const float* x, uint8_t* dst, int64_t n);
//     static constexpr Q8PanelLayout kPanels;  // low_bits 0: no 8-bit activation path
//     static Q8SourceBlock Unpack(const uint8_t* row, int64_t b);  // with panels only
//     static float Value(const uint8_t* row, int64_t i);           // plain floats only
//   };
// Each value is the float arithmetic of the gguf package's numpy
// dequantization, in its order (a scale product rounded before it
// multiplies q, a min subtracted after): bit for bit, as
// tests/reference/dequant_reference.py checks on every block of the real
// model files.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "common/float16.h"

namespace kvfleet::kernels {

template <DType T>
struct CpuFormat;  // one specialization per weight type, in kernels/cpu/formats/

struct Block32 {
  __m256 v0, v1, v2, v3;  // elements 0–7, 8–15, 16–23, 24–31
};

// How a format's 8-bit panel blocks hold its scales (q8_panels.h).
enum class Q8Scales : uint8_t {
  kHalf,          // the legacy formats: f16 d per row (and f16 m with a min)
  kPacked4,       // Q2_K: a 4-bit scale | 4-bit min << 4 per row and half
  kSigned8,       // Q3_K, Q6_K: a signed byte per row and half
  kScaleAndMin8,  // Q4_K, Q5_K: an unsigned scale byte and min byte per row
};

// The shape of a format's panel blocks for the 8-bit activation matmul
// (q8_panels.h); a constant per type (the kernels read it at compile time).
struct Q8PanelLayout {
  int low_bits = 0;            // 8, 4 or 2 (0: the type has no panels)
  int high_bits = 0;           // 0, 1 or 2
  int halves = 1;              // 2: a scale (and min) per 16 values
  int zero = 0;                // subtracted from u: Q4_0 8, Q5_0 16, Q3_K 4, Q6_K 32
  bool has_min = false;        // Q4_1, Q5_1: + m; Q2_K, Q4_K, Q5_K: − dmin · min
  bool super = false;          // K-quant: a header per 8 blocks
  int64_t block_bytes = 0;     // one panel block: 8 rows × 32 values
  int64_t header_bytes = 0;    // before each 8 panel blocks (K-quants)
  bool signed_values = false;  // Q8_0: the bytes are signed (|w| against x with w's sign)
  Q8Scales scales = Q8Scales::kHalf;
};

// Block b (32 values) of a row in GGUF's layout, unpacked: what the panels
// hold of it. d and dmin are f16 bits (a K-quant's: its super-block's);
// scale and min the sub-block fields of each 16-value half (the same for
// both when the format has one per 32 values).
struct Q8SourceBlock {
  uint8_t u[32];  // unsigned values; Q8_0: the bits of its signed bytes
  uint16_t d = 0;
  uint16_t dmin = 0;          // Q4_1, Q5_1: m
  uint8_t scale[2] = {0, 0};  // Q3_K, Q6_K: a signed byte (Q3_K's less its 32); Q2_K: the 4-bit scale
  uint8_t min[2] = {0, 0};    // Q2_K, Q4_K, Q5_K
};

namespace formats {

inline __m256 U8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
inline __m256 I8x8ToFloat(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }

// 32 unsigned bytes as four registers of floats, each minus `offset` (exact).
inline Block32 U8x32ToFloat(__m128i lo, __m128i hi, float offset) {
  const __m256 off = _mm256_set1_ps(offset);
  return {_mm256_sub_ps(U8x8ToFloat(lo), off), _mm256_sub_ps(U8x8ToFloat(_mm_srli_si128(lo, 8)), off),
          _mm256_sub_ps(U8x8ToFloat(hi), off), _mm256_sub_ps(U8x8ToFloat(_mm_srli_si128(hi, 8)), off)};
}

// 16 bits → 16 bytes of 0x10 (bit set) or 0: Q5_0's fifth bits, in place.
inline __m128i FifthBits(uint32_t bits16) {
  const __m128i spread = _mm_shuffle_epi8(_mm_set1_epi16(static_cast<int16_t>(bits16)),
                                          _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i mask = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(spread, mask), mask), _mm_set1_epi8(0x10));
}

// The unsigned nibble of element e (0..31) of a 32-value block's qs:
// element i in the low nibble of qs[i], element i+16 in the high one.
inline uint8_t Nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4; }

// The fifth bits of Q5_0 and Q5_1: bit e of a little-endian word.
inline uint8_t FifthBit(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

inline int RoundClamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// The K-quants' quantizers are plain min/max ones (ggml's search for the
// best scales is not restated): they write valid blocks, for the test
// models and tools; real K-quant files come from llama.cpp. This is the
// scale of each 16 values of a super-block whose largest magnitude is to
// be `steps` steps (Q3_K, Q6_K), and the largest of them.
inline float SymmetricScales16(const float* x, float steps, float* scale) {
  float max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
    scale[g] = amax / steps;
    max_scale = std::max(max_scale, scale[g]);
  }
  return max_scale;
}

// The float scale (and min) of each sub-block of a K-quant super-block:
// 8 of 32 values (Q4_K, Q5_K) or 16 of 16 (Q2_K, Q3_K, Q6_K).
struct SubBlockScales {
  float scale[16];
  float min[16];
};

// A K-quant's reader: block b is sub-block b % 8 of super-block b / 8,
// whose scales are decoded once (into float32: d · scale and dmin · min)
// when its first block is read. Format supplies DecodeScales(super, s) and
// Load(super, j, s).
template <class Format, int64_t kSuperBytes>
class SuperBlockReader {
 public:
  explicit SuperBlockReader(const uint8_t* row) : row_(row) {}

  inline __attribute__((always_inline)) Block32 Next(int64_t b) {
    const int j = static_cast<int>(b % 8);
    if (j == 0) {
      super_ = row_ + (b / 8) * kSuperBytes;
      Format::DecodeScales(super_, scales_);
    }
    return Format::Load(super_, j, scales_);
  }

 private:
  const uint8_t* row_;
  const uint8_t* super_ = nullptr;
  SubBlockScales scales_;
};

}  // namespace formats
}  // namespace kvfleet::kernels
