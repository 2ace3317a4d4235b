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
  // [num_tokens] or null: a token of a tree verify chunk has a nonzero mask
  // (below); every other token sees positions 0..position, as it always has.
  const uint64_t* tree_masks = nullptr;
};

// Tree verification: a verify chunk whose guesses branch. Its tokens are
// nodes 0..n-1 (node 0, the root, is the request's pending token), stored at
// cache indices base + i in node order (a parent before its children).
// tree_masks[t] has bit i set for every node token t sees: the root, its
// ancestors and itself. Its RoPE position is base + depth, depth = popcount
// − 1. It attends to exactly what plain decoding of its path would: cache
// indices [0, base], then its path's nodes in depth order. So logical key j
// (j ≤ position) of the token is stored at TreeKeyIndex(j): j itself up to
// base, then base + the (j − base)-th set bit. Constexpr: device code calls
// these too.
constexpr int32_t TreeMaskBits(uint64_t mask) {
  int32_t n = 0;
  for (; mask != 0; mask &= mask - 1) ++n;
  return n;
}

constexpr int64_t TreeBase(int64_t position, uint64_t mask) { return position - (TreeMaskBits(mask) - 1); }

constexpr int64_t TreeKeyIndex(int64_t j, int64_t position, uint64_t mask) {
  const int64_t base = TreeBase(position, mask);
  if (mask == 0 || j <= base) return j;
  for (int64_t k = j - base; k > 0; --k) mask &= mask - 1;  // drop the set bits before the (j − base)-th
  int64_t bit = 0;
  while ((mask & 1) == 0) {
    mask >>= 1;
    ++bit;
  }
  return base + bit;
}

// One past the highest cache index the token reads.
constexpr int64_t TreeKeyEnd(int64_t position, uint64_t mask) {
  if (mask == 0) return position + 1;
  int64_t top = 63;
  while ((mask >> top) == 0) --top;
  return TreeBase(position, mask) + top + 1;
}

// Whether cache index j (with base <= j) is one of the token's path nodes.
constexpr bool TreeSees(int64_t j, int64_t position, uint64_t mask) {
  const int64_t base = TreeBase(position, mask);
  return j <= base || (j - base < 64 && ((mask >> (j - base)) & 1) != 0);
}

}  // namespace kvfleet::kernels
