// F16: IEEE binary16, one value per 2 bytes.
#pragma once

#include <cstring>

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

template <>
struct CpuFormat<DType::kF16> {
  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const uint16_t*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      const uint16_t* p = row_ + 32 * b;
      return {Eight(p), Eight(p + 8), Eight(p + 16), Eight(p + 24)};
    }

   private:
    static __m256 Eight(const uint16_t* p) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    const uint16_t* row_;
  };

  // memcpy: a checkpoint's tensor may start at any byte (see f32.h).
  static float Value(const uint8_t* row, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, row + i * static_cast<int64_t>(sizeof(uint16_t)), sizeof(uint16_t));
    return HalfToFloat(bits);
  }

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    auto* out = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(x[i]);
  }

  static constexpr Q8PanelLayout kPanels{};  // the float path
};

}  // namespace kvfleet::kernels
