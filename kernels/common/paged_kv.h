// The paged KV cache's geometry and where a batch's tokens sit in it: shared
// by the CPU and CUDA kernels, so both read one layout.
//
// One tensor for K and one for V per layer, float16:
//   [num_blocks, num_kv_heads, block_size, head_dim]
// Position p of a sequence lives in physical block block_table[p / block_size],
// slot p % block_size; a token's own K/V go to kv_slots[t] = block * block_size + slot.
// Offsets are computed in 64 bits: a large cache overflows 32.
//
//   KvCacheLayout layout{.num_blocks = 4096, .num_kv_heads = 8, .block_size = 16, .head_dim = 128};
//   int64_t off = layout.Offset(block, kv_head, slot);
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

struct KvCacheLayout {
  int64_t num_blocks = 0;
  int64_t num_kv_heads = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;  // multiple of 8

  // Offset in elements of (block, kv_head, slot, 0).
  constexpr int64_t Offset(int64_t block, int64_t kv_head, int64_t slot) const {
    return ((block * num_kv_heads + kv_head) * block_size + slot) * head_dim;
  }
  constexpr int64_t ElementsPerLayer() const { return num_blocks * num_kv_heads * block_size * head_dim; }
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
