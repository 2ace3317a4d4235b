// The contract between the scheduler and a model executor for one step:
// which tokens of which sequences to compute, where their KV lives, and
// which positions need logits.
//
// A chunk computes tokens at positions [start_position, start_position + n)
// of one sequence; the KV of positions before start_position must already be
// in the cache blocks of its block table (prefix hits, earlier chunks, earlier
// decode steps). Prefill chunks, decode tokens and speculative tokens are all
// chunks: one code path.
//
//   ForwardBatch batch;
//   batch.chunks.push_back({.tokens = prompt, .start_position = 0, .block_table = table});
//   ASSIGN_OR_RETURN(ForwardOutput out, executor.Forward(batch));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/ids.h"
#include "model/token_id.h"

namespace kvfleet::engine {

enum class LogitsWanted { kNone, kLast, kAll };

struct SequenceChunk {
  std::span<const model::TokenId> tokens;
  int32_t start_position = 0;
  std::span<const BlockId> block_table;  // covers positions [0, start_position + tokens.size())
  LogitsWanted logits = LogitsWanted::kLast;
};

struct ForwardBatch {
  std::vector<SequenceChunk> chunks;
  // 0: the whole model. L > 0: only the first L layers, then the final norm
  // and the output head on their result (self-speculative drafting). The KV
  // written for those layers is what the full model writes for them.
  int32_t num_layers = 0;
};

// Logits rows in chunk order: for each chunk with kLast one row, with kAll one
// row per token. first_row[c] is chunk c's first row (its row count follows
// from its LogitsWanted).
struct ForwardOutput {
  int64_t vocab_size = 0;
  std::vector<float> logits;  // [rows, vocab_size]
  std::vector<int64_t> first_row;

  std::span<const float> Row(int64_t row) const {
    return {logits.data() + row * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

}  // namespace kvfleet::engine
