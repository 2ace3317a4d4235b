// KV cache sizing: the one formula the worker (start-up sizing), the CLI
// (model-info) and the capacity planner share.
//
//   KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes per value
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

constexpr int64_t KvBytesPerToken(const KvShape& shape, int64_t bytes_per_value) {
  return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * bytes_per_value;
}

// How many tokens of KV fit in `budget_bytes`.
constexpr int64_t KvTokensThatFit(const KvShape& shape, int64_t bytes_per_value, int64_t budget_bytes) {
  const int64_t per_token = KvBytesPerToken(shape, bytes_per_value);
  return per_token > 0 ? budget_bytes / per_token : 0;
}

}  // namespace kvfleet
