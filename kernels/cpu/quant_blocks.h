// Byte layouts of the quantized weight formats, identical to ggml's so GGUF
// tensors are used in place. Each block holds 32 consecutive elements of a row.
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
#pragma pack(pop)

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);

}  // namespace kvfleet::kernels
