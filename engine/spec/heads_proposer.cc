#include "engine/spec/heads_proposer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/status_macros.h"

namespace kvfleet::engine::spec {

std::vector<TreeCandidate> TopCandidates(std::span<const float> logits, std::span<const model::TokenId> vocab_ids,
                                         int32_t top_k) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  if (!std::isfinite(max_logit)) return {};
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), int64_t{0});
  const size_t k = static_cast<size_t>(std::clamp<int64_t>(top_k, 0, vocab));
  const float* l = logits.data();
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [l](int64_t a, int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  std::vector<TreeCandidate> out;
  for (size_t j = 0; j < k; ++j) {
    const int64_t v = order[j];
    out.push_back({.token = vocab_ids[static_cast<size_t>(v)],
                   .probability = std::exp(static_cast<double>(l[v] - max_logit)) / sum});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<HeadsProposer>> HeadsProposer::Create(std::shared_ptr<const model::DraftHeads> heads,
                                                                     ModelExecutor& target, int32_t top_k) {
  RETURN_IF_ERROR(target.LoadDraftHeads(heads));
  return std::unique_ptr<HeadsProposer>(new HeadsProposer(std::move(heads), target, top_k));
}

HeadsProposer::HeadsProposer(std::shared_ptr<const model::DraftHeads> heads, ModelExecutor& target, int32_t top_k)
    : heads_(std::move(heads)),
      target_(target),
      // What a round reads next to a target step, spread over its guesses.
      relative_cost_(target.info().weight_bytes > 0 ? static_cast<double>(heads_->weights().bytes()) /
                                                          target.info().weight_bytes / std::max(1, heads_->num_heads())
                                                    : 0.05),
      top_k_(std::max(1, top_k)) {}

absl::Status HeadsProposer::Propose(std::span<DraftSlot> slots) {
  const int64_t h = heads_->hidden_size();
  std::vector<DraftSlot*> asked;
  int32_t num_heads = 0;
  for (DraftSlot& slot : slots) {
    slot.draft.clear();
    slot.parents.clear();
    slot.worths.clear();
    if (static_cast<int64_t>(slot.hidden.size()) != h || slot.max_tokens <= 0) continue;
    asked.push_back(&slot);
    num_heads = std::max(num_heads, std::min(slot.max_tokens, heads_->num_heads()));
  }
  if (asked.empty()) return absl::OkStatus();
  // Every request's row in one call, every head it may use.
  const int64_t rows = static_cast<int64_t>(asked.size());
  hidden_.resize(static_cast<size_t>(rows * h));
  for (int64_t r = 0; r < rows; ++r) std::ranges::copy(asked[static_cast<size_t>(r)]->hidden, hidden_.begin() + r * h);
  ASSIGN_OR_RETURN(std::span<const float> logits, target_.RunDraftHeads(hidden_, rows, num_heads));
  const int64_t vocab = heads_->vocab_size();
  for (int64_t r = 0; r < rows; ++r) {
    DraftSlot& slot = *asked[static_cast<size_t>(r)];
    std::vector<std::vector<TreeCandidate>> per_depth;
    for (int32_t i = 0; i < std::min(slot.max_tokens, heads_->num_heads()); ++i) {
      per_depth.push_back(
          TopCandidates(logits.subspan(static_cast<size_t>((i * rows + r) * vocab), static_cast<size_t>(vocab)),
                        heads_->vocab_ids(), top_k_));
      // A head without a finite logit (a NaN or infinite state) ends every
      // path there.
      if (per_depth.back().empty()) {
        per_depth.pop_back();
        break;
      }
    }
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
