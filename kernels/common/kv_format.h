// How one K or V element is stored in the paged KV cache, shared by the CPU
// and CUDA kernels (and their host emulation), so a value written by one
// reads back bit-identical on the other:
//
//   kF16      IEEE binary16, 2 bytes.
//   kInt8     a signed byte per element and, per (token, KV head) row, one
//             binary16 scale: x ≈ q · scale, scale = max|x| / 127 (rounded to
//             binary16), q = round-half-even(x / scale) clamped to ±127.
//             (d + 2) / 2d of kF16's bytes: 0.516 at head_dim 64.
//   kFp8E4M3  OCP FP8 E4M3 (the format Hopper reads natively), 1 byte, no
//             scale: 3 mantissa bits, finite range ±448; larger values
//             saturate to ±448, rounding is to nearest even.
//   kInt8Rotated  kInt8 rows, with each key row rotated first by the
//             unnormalised Walsh–Hadamard transform H of its head
//             (HadamardBlocks): a key's few large channels (a K bias, say)
//             spread over the whole row, so one row scale leaves the other
//             channels more levels. Attention rotates each query row the
//             same way and multiplies the scores by 1/n: H·Hᵀ = n·I, so
//             (Hq)·(Hk)/n = q·k, and 1/n is a power of two (exact). Value
//             rows are stored as kInt8.
//   kInt8RotatedScaled  kInt8Rotated, with each key channel first
//             multiplied by 1/s and each query channel by s, where s is a
//             power of two >= 1 per (layer, KV head, channel) measured on a
//             calibration text (engine/calibration): channels whose keys
//             run far above the rest (Qwen2.5's K bias) no longer set the
//             row's scale alone. Powers of two keep both products exact, so
//             (q·s)·(k/s) = q·k before the codec.
//
// The codecs here are constexpr (callable from device code under nvcc's
// --expt-relaxed-constexpr); the binary16 scale conversion is each
// backend's own, exact on both.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace kvfleet::kernels {

enum class KvCacheDtype : uint8_t { kF16 = 0, kInt8 = 1, kFp8E4M3 = 2, kInt8Rotated = 3, kInt8RotatedScaled = 4 };

// "f16", "int8", "fp8_e4m3", "int8_rotated", "int8_rotated_scaled": the
// flag values and the numerics suffixes.
constexpr std::string_view KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kInt8:
      return "int8";
    case KvCacheDtype::kInt8Rotated:
      return "int8_rotated";
    case KvCacheDtype::kInt8RotatedScaled:
      return "int8_rotated_scaled";
    case KvCacheDtype::kFp8E4M3:
      return "fp8_e4m3";
    case KvCacheDtype::kF16:
      break;
  }
  return "f16";
}

// Bytes one element takes (a kInt8 row's scale not included).
constexpr int64_t KvElementBytes(KvCacheDtype dtype) { return dtype == KvCacheDtype::kF16 ? 2 : 1; }
// Bytes of per-row scale: one binary16 per (token, KV head) for int8 rows.
constexpr int64_t KvRowScaleBytes(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kInt8 || dtype == KvCacheDtype::kInt8Rotated ||
                 dtype == KvCacheDtype::kInt8RotatedScaled
             ? 2
             : 0;
}

// Whether key rows (and so queries) are rotated before the codec.
constexpr bool KvRotatesKeys(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kInt8Rotated || dtype == KvCacheDtype::kInt8RotatedScaled;
}

// Whether key (and query) channels are scaled by per-channel powers of two
// before the rotation: the format needs a layer's scales to write or read.
constexpr bool KvScalesKeyChannels(KvCacheDtype dtype) { return dtype == KvCacheDtype::kInt8RotatedScaled; }

// The rotation's block: the largest power of two dividing head_dim (the
// whole row for the usual 64, 128 and 256).
constexpr int64_t KvRotationBlock(int64_t head_dim) { return head_dim & -head_dim; }

// The unnormalised Walsh–Hadamard transform of each n-value block of
// x[0, d), in place (n a power of two dividing d): butterflies of stride
// 1, 2, 4, ... in index order, each (a + b, a − b). Only additions, in one
// fixed order, so the rotated row is the same bits on every backend, and
// applying it twice gives n·x exactly for values whose sums stay exact.
template <typename T>
constexpr void HadamardBlocks(T* x, int64_t d, int64_t n) {
  for (int64_t base = 0; base < d; base += n) {
    for (int64_t h = 1; h < n; h *= 2) {
      for (int64_t i = base; i < base + n; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const T a = x[j], b = x[j + h];
          x[j] = a + b;
          x[j + h] = a - b;
        }
      }
    }
  }
}

constexpr int32_t kInt8KvMax = 127;

// Round half to even of a non-negative float below 2^23, as an integer.
constexpr int32_t RoundHalfEvenNonNegative(float x) {
  const int32_t i = static_cast<int32_t>(x);
  const float frac = x - static_cast<float>(i);
  return frac > 0.5f || (frac == 0.5f && (i & 1) != 0) ? i + 1 : i;
}

// x / scale rounded half to even and clamped to ±127; 0 when scale is 0.
constexpr int8_t QuantizeInt8(float x, float scale) {
  if (scale == 0.0f) return 0;
  const float q = x / scale;
  const float a = q < 0 ? -q : q;
  int32_t r = a >= static_cast<float>(kInt8KvMax) ? kInt8KvMax : RoundHalfEvenNonNegative(a);
  return static_cast<int8_t>(q < 0 ? -r : r);
}

// Arithmetic only (no bit casts: nvcc compiles this header as C++17; no
// tables: device code cannot read a host constexpr array), every step
// exact: integers below 2^24 and multiplications by powers of two.
// A normal value is (8 + mantissa) · 2^(exp − 10), a subnormal 2 · mantissa · 2^-10.
constexpr float Fp8E4M3ToFloat(uint8_t b) {
  const uint32_t exp = (b >> 3) & 0xFu, mant = b & 0x7u;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t integer = exp == 0 ? mant << 1 : (8 + mant) << exp;
  const float v = static_cast<float>(integer) * 0.0009765625f;
  return (b & 0x80u) != 0 ? -v : v;
}

// Round to nearest even; beyond ±448 saturates to ±448; NaN stays NaN.
// (−0 encodes as +0: the same value in every sum.)
constexpr uint8_t FloatToFp8E4M3(float f) {
  if (f != f) return 0x7F;  // NaN
  const uint8_t sign = f < 0 ? 0x80 : 0x00;
  const float a = f < 0 ? -f : f;
  if (a >= 448.0f) return sign | 0x7E;  // the largest finite (and inf)
  if (a < 0.015625f) {                  // below 2^-6: subnormal steps of 2^-9; 8 steps is 2^-6, the first normal
    return sign | static_cast<uint8_t>(RoundHalfEvenNonNegative(a * 512.0f));
  }
  // The exponent e with 2^(e − 7) <= a < 2^(e − 6), i.e. 2^e <= 128 · a < 2^(e + 1).
  const float scaled = a * 128.0f;
  uint32_t e = 1;
  while (e < 15 && scaled >= static_cast<float>(1u << (e + 1))) ++e;
  // a / 2^(e − 7) is in [1, 2): its fraction in eighths, rounded; 8 carries into the exponent.
  const float fraction = (scaled / static_cast<float>(1u << e) - 1.0f) * 8.0f;
  const uint32_t code = (e << 3) + static_cast<uint32_t>(RoundHalfEvenNonNegative(fraction));
  return sign | static_cast<uint8_t>(code > 0x7Eu ? 0x7Eu : code);
}

}  // namespace kvfleet::kernels
