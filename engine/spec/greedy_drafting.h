// The drafting loop shared by the model-based proposers: for every slot,
// catch the model up on the context's uncomputed tail (in pieces that fit the
// executor's batch limits; the last piece's logits give the first guess),
// then feed each argmax back in, one batched forward pass per draft position,
// until every slot has max_tokens guesses.
//
// Drafts are greedy (the model's argmax): a point guess, verified exactly
// like an n-gram's, so the target's own sampling decides every kept token
// (see engine/README.md, "Speculative decoding").
//
//   GreedyDraftSequence seqs[] = {{.slot = &slot, .start = n_computed, .block_table = table}};
//   RETURN_IF_ERROR(DraftGreedily(executor, /*num_layers=*/0, seqs));
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "engine/executor/model_executor.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

struct GreedyDraftSequence {
  DraftSlot* slot;
  int32_t start = 0;                     // the model's KV covers context[0, start); start < context.size()
  std::span<const BlockId> block_table;  // covers context.size() + max_tokens - 1 positions
  int32_t lora_slot = -1;                // the executor's LoRA slot to draft under (-1: none)
};

// Replaces each slot's draft. num_layers as in ForwardBatch.
absl::Status DraftGreedily(ModelExecutor& executor, int32_t num_layers, std::span<GreedyDraftSequence> sequences);

}  // namespace kvfleet::engine::spec
