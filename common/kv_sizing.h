// KV cache sizing: the one formula the worker (start-up sizing), the CLI
// (model-info) and the capacity planner share.
//
//   KV bytes per token = 2 (K and V) × layers × kv_heads × (head_dim × bytes per value + row scale bytes)
//
// (row scale bytes: an 8-bit cache's per-token, per-head scale; 0 otherwise.)
//
//   KvShape shape{.num_layers = 80, .num_kv_heads = 8, .head_dim = 128};
//   int64_t b = KvBytesPerToken(shape, /*bytes_per_value=*/2);  // 327,680
#pragma once

#include <cstdint>

namespace kvfleet {

struct KvShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

constexpr int64_t KvBytesPerToken(const KvShape& shape, int64_t bytes_per_value, int64_t row_scale_bytes = 0) {
  return 2 * shape.num_layers * shape.num_kv_heads * (shape.head_dim * bytes_per_value + row_scale_bytes);
}

// How many tokens of KV fit in `budget_bytes`.
constexpr int64_t KvTokensThatFit(const KvShape& shape, int64_t bytes_per_value, int64_t budget_bytes) {
  const int64_t per_token = KvBytesPerToken(shape, bytes_per_value);
  return per_token > 0 ? budget_bytes / per_token : 0;
}

// Blocks of `block_size` tokens that hold `tokens` (rounded up).
constexpr int64_t BlocksForTokens(int64_t tokens, int64_t block_size) {
  return block_size > 0 ? (tokens + block_size - 1) / block_size : 0;
}

// How a memory budget turns into KV blocks: the worker's memory plan and the
// capacity planner both call this, so the planner's count is the worker's.
struct KvCachePlan {
  int64_t bytes_per_token = 0;
  int64_t num_blocks = 0;
  int64_t tokens = 0;                  // num_blocks × block_size
  int64_t full_context_sequences = 0;  // sequences of context_length tokens that fit at once
};

// `bytes_per_token` covers every cache a token occupies (the target's, and a
// draft model's when there is one): each block holds block_size of them.
constexpr KvCachePlan PlanKvCache(int64_t bytes_per_token, int64_t block_size, int64_t budget_bytes,
                                  int64_t context_length) {
  KvCachePlan plan;
  plan.bytes_per_token = bytes_per_token;
  if (plan.bytes_per_token <= 0 || block_size <= 0 || budget_bytes <= 0) return plan;
  plan.num_blocks = budget_bytes / (plan.bytes_per_token * block_size);
  plan.tokens = plan.num_blocks * block_size;
  const int64_t blocks_per_sequence = BlocksForTokens(context_length, block_size);
  plan.full_context_sequences = blocks_per_sequence > 0 ? plan.num_blocks / blocks_per_sequence : 0;
  return plan;
}

}  // namespace kvfleet
