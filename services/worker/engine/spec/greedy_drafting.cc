#include "services/worker/engine/spec/greedy_drafting.h"

#include <algorithm>

#include "common/status_macros.h"

namespace kvfleet::engine::spec {
namespace {

model::TokenId Argmax(std::span<const float> row) {
  // First maximum: ties go to the lowest id, as in the sampler.
  return static_cast<model::TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

absl::Status DraftGreedily(ModelExecutor& executor, int32_t num_layers, std::span<GreedyDraftSequence> sequences) {
  int32_t longest = 0;
  for (const GreedyDraftSequence& s : sequences) {
    s.slot->draft.clear();
    s.slot->rows_computed = 0;
    longest = std::max(longest, s.slot->max_tokens);
  }
  for (int32_t j = 0; j < longest; ++j) {
    ForwardBatch batch{.num_layers = num_layers};
    std::vector<DraftSlot*> in_batch;
    for (GreedyDraftSequence& s : sequences) {
      DraftSlot& slot = *s.slot;
      if (j >= slot.max_tokens) continue;
      const int32_t n = static_cast<int32_t>(slot.context.size());
      if (j == 0) {
        batch.chunks.push_back({.tokens = slot.context.subspan(s.start), .start_position = s.start,
                                .block_table = s.block_table, .logits = LogitsWanted::kLast});
      } else {
        batch.chunks.push_back({.tokens = std::span(slot.draft).subspan(j - 1, 1), .start_position = n + j - 1,
                                .block_table = s.block_table, .logits = LogitsWanted::kLast});
      }
      in_batch.push_back(&slot);
    }
    ASSIGN_OR_RETURN(ForwardOutput out, executor.Forward(batch));
    for (size_t c = 0; c < in_batch.size(); ++c) {
      in_batch[c]->draft.push_back(Argmax(out.Row(out.first_row[c])));
      in_batch[c]->rows_computed += static_cast<int32_t>(batch.chunks[c].tokens.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine::spec
