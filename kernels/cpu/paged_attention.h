// Causal grouped-query attention over a paged KV cache, and the write of new
// K/V rows into their cache slots.
//
// KV cache layout, one tensor for K and one for V per layer, float16:
//   [num_blocks, num_kv_heads, block_size, head_dim]
// Token position p of a sequence lives in physical block
// block_table[p / block_size], slot p % block_size.
//
// Exactness: each (token, head) output is one fixed sequence of operations
// over positions 0..p in order — independent of the batch it is in, of
// which physical blocks hold its context, and of the thread count.
//
//   PagedAttention(params, pool);
#pragma once

#include <cstdint>

#include "common/thread_pool.h"

namespace kvfleet::kernels {

struct KvCacheLayout {
  int64_t num_blocks = 0;
  int64_t num_kv_heads = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;  // multiple of 8

  // Offset in elements of (block, kv_head, slot, 0).
  int64_t Offset(int64_t block, int64_t kv_head, int64_t slot) const {
    return ((block * num_kv_heads + kv_head) * block_size + slot) * head_dim;
  }
};

// Where each token of a batch belongs.
struct TokenPlacement {
  const int32_t* positions = nullptr;     // [num_tokens] absolute position in its sequence
  const int32_t* sequence = nullptr;      // [num_tokens] index into block_tables
  const int32_t* const* block_tables = nullptr;  // [num_sequences] → physical block ids
};

// Converts k and v ([num_tokens, num_kv_heads, head_dim], float32) to float16
// and stores them at each token's slot.
void WriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
             int64_t num_tokens, uint16_t* k_cache, uint16_t* v_cache);

struct PagedAttentionParams {
  KvCacheLayout layout;
  TokenPlacement where;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;             // query heads; a multiple of layout.num_kv_heads
  float scale = 1.0f;                // usually 1/sqrt(head_dim)
  const float* q = nullptr;          // [num_tokens, num_heads, head_dim]
  const uint16_t* k_cache = nullptr;
  const uint16_t* v_cache = nullptr;
  float* out = nullptr;              // [num_tokens, num_heads, head_dim]
};

// Token t attends to positions 0..positions[t] of its own sequence, which
// must already be in the cache (including its own K/V).
void PagedAttention(const PagedAttentionParams& p, ThreadPool& pool);

}  // namespace kvfleet::kernels
