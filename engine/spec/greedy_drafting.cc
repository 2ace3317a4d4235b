#include "engine/spec/greedy_drafting.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "engine/sampler/argmax.h"

namespace kvfleet::engine::spec {
namespace {

// The model's KV catches up with each sequence's context in pieces that fit
// the executor's batch limits; the piece that reaches the end of a context
// yields that sequence's first guess.
absl::Status CatchUp(ModelExecutor& executor, int32_t num_layers, std::span<GreedyDraftSequence> sequences,
                     ForwardBatchBuilder& builder) {
  const ExecutorLimits& limits = executor.info().limits;
  std::vector<int32_t> next;
  for (const GreedyDraftSequence& s : sequences) next.push_back(s.start);
  std::vector<size_t> finishing;  // in logits-row order
  while (true) {
    builder.Clear(num_layers);
    finishing.clear();
    int32_t budget = limits.max_batch_tokens, chunks = 0;
    for (size_t i = 0; i < sequences.size() && budget > 0 && chunks < limits.max_batch_chunks; ++i) {
      DraftSlot& slot = *sequences[i].slot;
      const int32_t n = static_cast<int32_t>(slot.context.size());
      if (next[i] >= n) continue;
      const int32_t take = std::min(n - next[i], budget);
      const bool last = next[i] + take == n;
      builder.AddChunk(slot.context.subspan(next[i], take), next[i], sequences[i].block_table,
                       last ? LogitsWanted::kLast : LogitsWanted::kNone, {}, sequences[i].lora_slot);
      if (last) finishing.push_back(i);
      slot.rows_computed += take;
      next[i] += take;
      budget -= take;
      ++chunks;
    }
    if (chunks == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(ForwardOutput out, executor.Forward(builder.Finish()));
    for (size_t r = 0; r < finishing.size(); ++r) {
      sequences[finishing[r]].slot->draft.push_back(Argmax(out.Row(static_cast<int64_t>(r))));
    }
  }
}

}  // namespace

absl::Status DraftGreedily(ModelExecutor& executor, int32_t num_layers, std::span<GreedyDraftSequence> sequences) {
  int32_t longest = 0;
  std::vector<GreedyDraftSequence> drafting;
  for (const GreedyDraftSequence& s : sequences) {
    s.slot->draft.clear();
    s.slot->rows_computed = 0;
    if (s.slot->max_tokens <= 0) continue;
    drafting.push_back(s);
    longest = std::max(longest, s.slot->max_tokens);
  }
  ForwardBatchBuilder builder = BatchBuilderFor(executor.info());
  RETURN_IF_ERROR(CatchUp(executor, num_layers, drafting, builder));
  // Then each argmax goes back in, one batched pass per draft position (more
  // passes only if the sequences outnumber the executor's chunk limit).
  const size_t per_pass = static_cast<size_t>(executor.info().limits.max_batch_chunks);
  std::vector<DraftSlot*> in_batch;
  for (int32_t j = 1; j < longest; ++j) {
    for (size_t first = 0; first < drafting.size(); first += per_pass) {
      builder.Clear(num_layers);
      in_batch.clear();
      for (size_t i = first; i < std::min(drafting.size(), first + per_pass); ++i) {
        DraftSlot& slot = *drafting[i].slot;
        if (j >= slot.max_tokens) continue;
        const int32_t n = static_cast<int32_t>(slot.context.size());
        builder.AddChunk(std::span(slot.draft).subspan(j - 1, 1), n + j - 1, drafting[i].block_table,
                         LogitsWanted::kLast, {}, drafting[i].lora_slot);
        in_batch.push_back(&slot);
      }
      if (in_batch.empty()) continue;
      ASSIGN_OR_RETURN(ForwardOutput out, executor.Forward(builder.Finish()));
      for (size_t c = 0; c < in_batch.size(); ++c) {
        in_batch[c]->draft.push_back(Argmax(out.Row(static_cast<int64_t>(c))));
        in_batch[c]->rows_computed += 1;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine::spec
