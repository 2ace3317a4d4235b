// Byte layouts of the quantized weight formats, identical to ggml's so GGUF
// tensors are used in place. A block holds 32 consecutive elements of a row;
// a K-quant super-block holds 256, in sub-blocks of 32 (Q4_K) or 16 (Q6_K)
// with their own scales.
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
struct BlockQ4_K {
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the mins
  uint8_t scales[12];  // 8 × (6-bit scale, 6-bit min), packed as ggml's get_scale_min_k4 reads them
  uint8_t qs[128];     // sub-block j: the low (j even) or high (j odd) nibbles of qs[32·(j/2) ...]
};                     // value = (d · scale_j) · q − (dmin · min_j)
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
static_assert(sizeof(BlockQ4_K) == 144);
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

}  // namespace kvfleet::kernels
