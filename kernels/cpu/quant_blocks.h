// Byte layouts of the quantized weight formats, identical to ggml's so GGUF
// tensors are used in place. A block holds 32 consecutive elements of a row;
// a K-quant super-block holds 256, in sub-blocks of 32 (Q4_K, Q5_K) or 16
// (Q2_K, Q3_K, Q6_K) with their own scales.
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

inline constexpr int kQuantBlock = 32;

#pragma pack(push, 1)
struct BlockQ8_0 {
  uint16_t d;          // f16 scale
  int8_t qs[32];       // value = qs[i] · d
};
struct BlockQ4_0 {
  uint16_t d;          // f16 scale
  uint8_t qs[16];      // element i in the low nibble of qs[i], element i+16 in the high one; value = (q − 8) · d
};
struct BlockQ4_1 {
  uint16_t d;          // f16 scale
  uint16_t m;          // f16 minimum
  uint8_t qs[16];      // nibbles as in Q4_0; value = q · d + m (computed as one fused multiply-add)
};
struct BlockQ5_0 {
  uint16_t d;          // f16 scale
  uint8_t qh[4];       // bit i of this little-endian word is the fifth bit of element i
  uint8_t qs[16];      // low four bits: element i in the low nibble of qs[i], i+16 in the high one
};                     // value = (q − 16) · d
struct BlockQ5_1 {
  uint16_t d;          // f16 scale
  uint16_t m;          // f16 minimum
  uint8_t qh[4];       // fifth bits, as in Q5_0
  uint8_t qs[16];      // low four bits, as in Q5_0
};                     // value = q · d + m
struct BlockQ2_K {
  uint8_t scales[16];  // per 16 values: scale in the low nibble, min in the high one
  uint8_t qs[64];      // value e = 128h + 32s + l: bits 2s, 2s+1 of qs[32h + l]
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
};                     // value = (d · scale) · q − (dmin · min)
struct BlockQ3_K {
  uint8_t hmask[32];   // value e = 32i + l: its third bit is bit i of hmask[l]
  uint8_t qs[64];      // low two bits, laid out as Q2_K's
  uint8_t scales[12];  // 16 × 6 bits (Q3KScale unpacks them), stored + 32
  uint16_t d;          // f16 scale of the scales
};                     // value = (d · (scale − 32)) · (q − 4)
struct BlockQ4_K {
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
  uint8_t scales[12];  // 8 × (6-bit scale, 6-bit min), packed as ggml's get_scale_min_k4 reads them
  uint8_t qs[128];     // sub-block j: the low (j even) or high (j odd) nibbles of qs[32·(j/2) ...]
};                     // value = (d · scale_j) · q − (dmin · min_j)
struct BlockQ5_K {
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
  uint8_t scales[12];  // as Q4_K's
  uint8_t qh[32];      // value e = 32i + l: its fifth bit is bit i of qh[l]
  uint8_t qs[128];     // low four bits, laid out as Q4_K's
};                     // value = (d · scale) · q − (dmin · min)
struct BlockQ6_K {
  uint8_t ql[128];     // low four bits (two halves of 128 values: 64 low nibbles, 64 high nibbles each)
  uint8_t qh[64];      // high two bits (two halves: 32 bytes, four 2-bit fields each)
  int8_t scales[16];   // one per 16 values
  uint16_t d;          // f16 scale of the scales
};                     // value = (d · scale) · (q − 32)
#pragma pack(pop)

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j's 6-bit scale and min of a Q4_K super-block.
inline void Q4KScaleMin(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Scale g (0..15) of a Q3_K super-block, signed: the low four bits are the
// low (g < 8) or high nibble of scales[g % 8], the top two bits field g / 4
// of scales[8 + g % 4].
inline int Q3KScale(const uint8_t* scales, int g) {
  const int low = (scales[g % 8] >> (4 * (g / 8))) & 0x0f;
  const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace kvfleet::kernels
