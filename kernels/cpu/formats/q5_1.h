// Q5_1: blocks of 32 values: an f16 scale d, an f16 minimum m, then Q5_0's
// fifth bits and low nibbles; value = q · d + m (one fused multiply-add:
// q · d is exact). ggml's reference quantizer (quantize_row_q5_1_ref).
#pragma once

#include "kernels/cpu/formats/format_common.h"
#include "kernels/cpu/formats/q5_0.h"

namespace kvfleet::kernels {

#pragma pack(push, 1)
struct BlockQ5_1 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 minimum
  uint8_t qh[4];   // fifth bits, as in Q5_0
  uint8_t qs[16];  // low four bits, as in Q5_0
};
#pragma pack(pop)
static_assert(sizeof(BlockQ5_1) == Traits(DType::kQ5_1).block_bytes);

template <>
struct CpuFormat<DType::kQ5_1> {
  using Block = BlockQ5_1;

  class Reader {
   public:
    explicit Reader(const uint8_t* row) : row_(reinterpret_cast<const Block*>(row)) {}
    inline __attribute__((always_inline)) Block32 Next(int64_t b) const {
      const Block& q = row_[b];
      const Block32 v = formats::FiveBitValues(q, 0.0f);
      const __m256 d = _mm256_set1_ps(HalfToFloat(q.d));
      // q · d + m fused: q · d is exact (11 × 5 bits), so this is the gguf package's multiply-then-add.
      const __m256 m = _mm256_set1_ps(HalfToFloat(q.m));
      return {_mm256_fmadd_ps(v.v0, d, m), _mm256_fmadd_ps(v.v1, d, m), _mm256_fmadd_ps(v.v2, d, m),
              _mm256_fmadd_ps(v.v3, d, m)};
    }

   private:
    const Block* row_;
  };

  static void Quantize(const float* x, uint8_t* dst, int64_t n) {
    Block* b = reinterpret_cast<Block*>(dst);
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
      float min = x[0], max = x[0];
      for (int j = 1; j < 32; ++j) {
        min = std::min(min, x[j]);
        max = std::max(max, x[j]);
      }
      const float d = (max - min) / 31.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      b[i].d = FloatToHalf(d);
      b[i].m = FloatToHalf(min);
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
        const int q1 = std::min(31, static_cast<int>((x[j + 16] - min) * id + 0.5f));
        b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
        qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
      }
      std::memcpy(b[i].qh, &qh, sizeof(qh));
    }
  }

  static constexpr Q8PanelLayout kPanels{.low_bits = 4, .high_bits = 1, .has_min = true, .block_bytes = 192};
  static_assert(kPanels.block_bytes == 8 * sizeof(Block));

  static Q8SourceBlock Unpack(const uint8_t* row, int64_t b) {
    const Block& q = reinterpret_cast<const Block*>(row)[b];
    Q8SourceBlock s = formats::UnpackFiveBits(q);
    s.dmin = q.m;
    return s;
  }
};

}  // namespace kvfleet::kernels
