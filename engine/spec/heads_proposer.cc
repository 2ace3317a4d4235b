#include "engine/spec/heads_proposer.h"

#include <algorithm>

namespace kvfleet::engine::spec {

HeadsProposer::HeadsProposer(DraftHeads heads, int64_t target_weight_bytes)
    : heads_(std::move(heads)),
      // What a round reads next to a target step, spread over its guesses.
      relative_cost_(target_weight_bytes > 0
                         ? static_cast<double>(heads_.bytes()) / target_weight_bytes / std::max(1, heads_.num_heads())
                         : 0.05) {}

absl::Status HeadsProposer::Propose(std::span<DraftSlot> slots) {
  for (DraftSlot& slot : slots) {
    slot.draft.clear();
    if (static_cast<int64_t>(slot.hidden.size()) != heads_.hidden_size() || slot.max_tokens <= 0) continue;
    slot.draft = heads_.Guess(slot.hidden, slot.max_tokens);
    // A state without a finite logit (NaN or infinite values) guesses
    // nothing from there on.
    const auto bad = std::find_if(slot.draft.begin(), slot.draft.end(), [](model::TokenId t) { return t < 0; });
    slot.draft.erase(bad, slot.draft.end());
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine::spec
