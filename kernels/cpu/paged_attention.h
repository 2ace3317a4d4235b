// Causal grouped-query attention over a paged KV cache, optionally over a
// sliding window, and the write of new K/V rows into their cache slots.
//
// The cache layout and the token placement are kernels/common/paged_kv.h's.
//
// Exactness: each (token, head) output is one fixed sequence of operations
// over its visible positions in ascending order (0..p, or p − window + 1..p)
// — independent of the batch it is in, of which physical blocks hold its
// context, and of the thread count.
//
// Cost: the consecutive tokens of one sequence in a batch (a prefill chunk,
// a verify chunk) and the query heads that share a KV head are computed as
// one tile, which converts each cached K and V row (float16, int8 or FP8:
// kv_format.h) once for all of them instead of once per (token, head);
// README.md, "Attention".
//
//   PagedAttention(params, pool);
#pragma once

#include <cstdint>
#include <span>

#include "common/thread_pool.h"
#include "kernels/common/paged_kv.h"

namespace kvfleet::kernels {

// Converts k and v ([num_tokens, num_kv_heads, head_dim], float32) to the
// layout's dtype and stores them at each token's slot (where.kv_slots).
// key_scales: the layer's [num_kv_heads, head_dim] powers of two when the
// dtype scales key channels (KvScalesKeyChannels), else unused.
void WriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
             int64_t num_tokens, uint8_t* k_cache, uint8_t* v_cache, const float* key_scales = nullptr);

// Copies K or V rows (scales included) of every KV head from slot from[i]
// to slot to[i] (page * block_size + slot), one move after another.
void MoveKvRows(const KvCacheLayout& layout, std::span<const int64_t> from, std::span<const int64_t> to,
                uint8_t* cache);

struct PagedAttentionParams {
  KvCacheLayout layout;
  TokenPlacement where;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;             // query heads; a multiple of layout.num_kv_heads
  float scale = 1.0f;                // usually 1/sqrt(head_dim)
  int64_t window = 0;                // 0: keys 0..p; w > 0: keys k with p − k < w
  const float* q = nullptr;          // [num_tokens, num_heads, head_dim]
  const uint8_t* k_cache = nullptr;  // bytes in the layout
  const uint8_t* v_cache = nullptr;
  float* out = nullptr;              // [num_tokens, num_heads, head_dim]
  // The layer's [num_kv_heads, head_dim] key channel scales (powers of two)
  // when the dtype has them (KvScalesKeyChannels); each query channel is
  // multiplied by its KV head's.
  const float* key_scales = nullptr;
};

// Token t attends to positions 0..positions[t] of its own sequence (the
// last `window` of them when a window is set), which must already be in the
// cache (including its own K/V); a tree verify chunk's token, to its path
// (paged_kv.h, "Tree verification"), with the same arithmetic as plain
// decoding of that path.
void PagedAttention(const PagedAttentionParams& p, ThreadPool& pool);

// Sizes the calling thread's scratch for contexts up to max_context, so no
// later PagedAttention on it allocates (run it on each pool thread).
void ReservePagedAttentionScratch(int64_t max_context, int64_t heads_per_kv_head, int64_t head_dim,
                                  int64_t block_size);

}  // namespace kvfleet::kernels
