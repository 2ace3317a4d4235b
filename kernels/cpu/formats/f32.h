// F32: IEEE binary32, one value per 4 bytes.
#pragma once

#include <cstring>

#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

template <>
struct CpuFormat<DType::kF32> {
  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const float*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      const float* p = row_ + 32 * b;
      return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24)};
    }

   private:
    const float* row_;
  };

  // memcpy: a checkpoint's tensor may start at any byte (safetensors does
  // not align its offsets), and a float read there must not assume 4.
  static float Value(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + i * static_cast<int64_t>(sizeof(float)), sizeof(float));
    return v;
  }

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
  }

  static constexpr Q8PanelLayout kPanels{};  // the float path
};

}  // namespace kvfleet::kernels
