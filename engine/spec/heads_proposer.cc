#include "engine/spec/heads_proposer.h"

#include <algorithm>

#include "engine/spec/draft_tree.h"

namespace kvfleet::engine::spec {

HeadsProposer::HeadsProposer(DraftHeads heads, int64_t target_weight_bytes, int32_t top_k)
    : heads_(std::move(heads)),
      // What a round reads next to a target step, spread over its guesses.
      relative_cost_(target_weight_bytes > 0
                         ? static_cast<double>(heads_.bytes()) / target_weight_bytes / std::max(1, heads_.num_heads())
                         : 0.05),
      top_k_(std::max(1, top_k)) {}

absl::Status HeadsProposer::Propose(std::span<DraftSlot> slots) {
  for (DraftSlot& slot : slots) {
    slot.draft.clear();
    slot.parents.clear();
    slot.worths.clear();
    if (static_cast<int64_t>(slot.hidden.size()) != heads_.hidden_size() || slot.max_tokens <= 0) continue;
    std::vector<std::vector<TreeCandidate>> per_depth =
        heads_.Candidates(slot.hidden, std::min(slot.max_tokens, heads_.num_heads()), top_k_);
    // A head without a finite logit (a NaN or infinite state) ends every
    // path there.
    per_depth.erase(std::find_if(per_depth.begin(), per_depth.end(), [](const auto& head) { return head.empty(); }),
                    per_depth.end());
    if (top_k_ == 1) {
      // A chain: the most likely token at each depth.
      double worth = 1.0;
      for (const std::vector<TreeCandidate>& depth : per_depth) {
        worth *= depth.front().probability;
        slot.draft.push_back(depth.front().token);
        slot.worths.push_back(worth);
      }
      continue;
    }
    DraftTree tree = BestFirstTree(per_depth, slot.max_tokens);
    slot.draft = std::move(tree.tokens);
    slot.parents = std::move(tree.parents);
    slot.worths = std::move(tree.worths);
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine::spec
