// Scalar conversions between float and the 16-bit float formats (IEEE half
// and bfloat16). The SIMD kernels use F16C instructions for bulk work; these
// are the reference semantics and the tail path.
//
//   uint16_t h = FloatToHalf(1.5f);
//   float f = HalfToFloat(h);
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kvfleet {

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Round to nearest even, as the F16C instruction does.
inline uint16_t FloatToHalf(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kvfleet
