// Causal grouped-query attention over the paged KV cache on the GPU,
// optionally over a sliding window, and the write of new K/V into their slots. The cache layout and token placement
// are kernels/common/paged_kv.h's (float16, int8 or FP8 rows in
// [num_blocks, kv_heads] regions: kv_format.h), the same as the CPU
// backend's, and the values decoded are the same bits.
//
// Two kernels per group of attention_plan.h's work: a partition kernel (one
// block per tile × partition × KV head) writes, for each query row and
// partition, its running max m, its sum l of exp(s − m) and its unnormalised
// output o; a combine kernel merges a token's partitions in partition order.
// Decode tokens and prefill (or verify) chunks run the same partition kernel,
// as tiles of one token or of several.
//
// Exactness: a row's result is the same whatever its tile, its batch, its
// group, the chunking of its prompt or where its blocks sit, because every
// reduction's order is fixed by the row's own position and the head
// dimension alone:
//   - a key's score: one thread fuse-multiply-adds q·k over the head
//     dimension in order (and the same thread does it for every query row of
//     the tile, reading the key once);
//   - a partition's max and sum: lane λ of a warp takes the partition's keys
//     j ≡ λ (mod 32) in order, then a butterfly across the warp;
//   - o: thread (d8, s) accumulates dims [8·d8, 8·d8 + 8) over keys
//     j ≡ s (mod S) in order, S = 128 / (head_dim / 8), then the S sums are
//     added in s order;
//   - partitions: M = max m, then L and o summed over partitions in order.
// Keys past a row's own position inside its tile's partition, and keys
// before its window, are masked to exp(−inf) = 0, which adds exact zeros: a
// prefill row equals the decode of the same token bit for bit. With a
// window, a row combines only its partitions from FirstPartitionFor on, and
// a tile's partition before every row's window does no work. A tree verify
// chunk's token (paged_kv.h) walks the logical keys of its path, each read
// from where its node is stored: the lanes and order of plain decoding.
//
//   LaunchWriteKv(layout, where, k, v, tokens, k_cache, v_cache, stream);
//   LaunchPagedAttention(params, plan, stream);
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/stream.h"
#include "kernels/common/paged_kv.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// Whether the kernels take this shape (head_dim 16, 32, 64, 128 or 256; at
// most kMaxTileRows query heads per KV head); `why` says otherwise.
bool PagedAttentionSupports(int64_t head_dim, int64_t num_heads, int64_t num_kv_heads, std::string* why);

// Converts k and v ([tokens, kv_heads, head_dim], float32) to the layout's
// dtype and stores them at each token's slot (where.kv_slots). key_scales:
// the layer's [kv_heads, head_dim] powers of two (device memory) when the
// dtype scales key channels, else unused.
void LaunchWriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
                   int64_t tokens, uint8_t* k_cache, uint8_t* v_cache, const float* key_scales,
                   ::kvfleet::cuda::Stream stream);

// Copies K or V rows (scales included) of every KV head of one cache
// array: moves[2i] → moves[2i + 1] (device memory; page * block_size +
// slot), in order, as kernels/cpu's MoveKvRows.
void LaunchMoveKvRows(const KvCacheLayout& layout, const int64_t* moves, int32_t count, uint8_t* cache,
                      ::kvfleet::cuda::Stream stream);

struct PagedAttentionParams {
  KvCacheLayout layout;
  TokenPlacement where;           // device arrays
  int64_t num_heads = 0;
  float scale = 1.0f;
  int64_t window = 0;             // 0: keys 0..p; w > 0: keys k with p − k < w
  const float* q = nullptr;       // [tokens, heads, head_dim]
  const uint8_t* k_cache = nullptr;  // bytes in the layout
  const uint8_t* v_cache = nullptr;
  float* out = nullptr;           // [tokens, heads, head_dim]
  // The plan's arrays on the device, and the workspace: partial_o holds
  // max_group_partials × heads × head_dim floats, partial_ml twice
  // max_group_partials × heads.
  const AttentionWorkItem* items = nullptr;
  const int64_t* partial_offsets = nullptr;
  float* partial_o = nullptr;
  float* partial_ml = nullptr;
  // The layer's [num_kv_heads, head_dim] key channel scales (device
  // memory) when the dtype has them: each query channel is multiplied by
  // its KV head's.
  const float* key_scales = nullptr;
};

// Runs every group of `plan` (host memory; its arrays already copied to
// p.items and p.partial_offsets). The batch's K/V must be written first.
void LaunchPagedAttention(const PagedAttentionParams& p, const AttentionPlan& plan, ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
