// The paged KV cache's geometry and where a batch's tokens sit in it: shared
// by the CPU and CUDA kernels, so both read one layout.
//
// One byte array for K and one for V per layer, made of one region per
// (block, KV head), [num_blocks, num_kv_heads]:
//   the block's block_size rows of head_dim elements (kv_format.h's dtype),
//   then, for kInt8, the rows' binary16 scales,
//   padded to a multiple of 16 bytes (aligned vector loads).
// Position p of a sequence lives in physical block block_table[p / block_size],
// slot p % block_size; a token's own K/V go to kv_slots[t] = block * block_size + slot.
// Offsets are in bytes, computed in 64 bits: a large cache overflows 32.
//
//   KvCacheLayout layout{.num_blocks = 4096, .num_kv_heads = 8, .block_size = 16, .head_dim = 128};
//   int64_t row = layout.RowOffset(block, kv_head, slot);
#pragma once

#include <cstdint>

#include "kernels/common/kv_format.h"

namespace kvfleet::kernels {

struct KvCacheLayout {
  int64_t num_blocks = 0;
  int64_t num_kv_heads = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;  // multiple of 8
  KvCacheDtype dtype = KvCacheDtype::kF16;

  constexpr int64_t RowBytes() const { return head_dim * KvElementBytes(dtype); }
  constexpr int64_t RegionBytes() const {
    return (block_size * (RowBytes() + KvRowScaleBytes(dtype)) + 15) / 16 * 16;
  }
  // Byte offset of (block, kv_head, slot)'s row.
  constexpr int64_t RowOffset(int64_t block, int64_t kv_head, int64_t slot) const {
    return (block * num_kv_heads + kv_head) * RegionBytes() + slot * RowBytes();
  }
  // Byte offset of a kInt8 row's scale.
  constexpr int64_t ScaleOffset(int64_t block, int64_t kv_head, int64_t slot) const {
    return (block * num_kv_heads + kv_head) * RegionBytes() + block_size * RowBytes() + slot * 2;
  }
  constexpr int64_t BytesPerLayer() const { return num_blocks * num_kv_heads * RegionBytes(); }
};

// Where each token of a batch belongs: the flat arrays of the executor's
// ForwardBatch, in the kernels' memory.
struct TokenPlacement {
  const int32_t* positions = nullptr;    // [num_tokens] absolute position in its sequence
  const int32_t* token_chunk = nullptr;  // [num_tokens] row of block_table
  const int32_t* block_table = nullptr;  // [num_chunks, table_width] physical block ids
  int64_t table_width = 0;
  const int64_t* kv_slots = nullptr;     // [num_tokens] block * block_size + slot of the token's own K/V
};

}  // namespace kvfleet::kernels
