// Draft heads as a proposer ("heads"): each request's guesses come from
// the hidden state that produced its pending token (the target's last row
// for it), through the heads (model/draft_heads.h) run on the target's own
// executor, so on a GPU worker they run on the GPU. No model runs: the
// cost is the heads' matrix products and the draft vocabulary's rows of
// the output head, for every request of the round in one call.
//
// With top_k > 1 the guesses are a tree (draft_tree.h): each head's top_k
// tokens, combined best first by the product of their probabilities, so the
// pass verifies the continuations most likely to be kept, not only the one
// most likely at each depth. Every guess carries that product as its
// worth, and the engine keeps as many guesses as pay.
//
// Thread-safety: engine thread only.
//
//   ASSIGN_OR_RETURN(auto heads, HeadsProposer::Create(std::move(loaded), target_executor, /*top_k=*/3));
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"
#include "engine/spec/draft_tree.h"
#include "engine/spec/proposer.h"
#include "model/draft_heads.h"

namespace kvfleet::engine::spec {

class HeadsProposer final : public Proposer {
 public:
  // Loads `heads` on `target`, which outlives the proposer; the target's
  // error when it cannot run them.
  static absl::StatusOr<std::unique_ptr<HeadsProposer>> Create(std::shared_ptr<const model::DraftHeads> heads,
                                                               ModelExecutor& target, int32_t top_k = 1);

  std::string_view name() const override { return "heads"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  double relative_cost() const override { return relative_cost_; }
  bool needs_hidden_state() const override { return true; }
  // A chain has one guess per head; a tree as many as the engine allows.
  int32_t max_draft_tokens() const override { return top_k_ > 1 ? INT32_MAX : heads_->num_heads(); }
  // A tree must be built before the engine can pick its best nodes (every
  // head is scored at once, however many are kept); a chain is sized first,
  // from the request's acceptance, so a request whose heads do not pay
  // skips their cost.
  bool drafts_before_sizing() const override { return top_k_ > 1; }
  int64_t MemoryBytes() const override { return heads_->weights().bytes(); }

 private:
  HeadsProposer(std::shared_ptr<const model::DraftHeads> heads, ModelExecutor& target, int32_t top_k);

  std::shared_ptr<const model::DraftHeads> heads_;
  ModelExecutor& target_;
  double relative_cost_;
  int32_t top_k_;
  std::vector<float> hidden_;  // the round's hidden rows, packed
};

// One head's `top_k` most likely draft-vocabulary tokens, most likely first
// (ties to the lower draft index, as a plain argmax), with their softmax
// probabilities over the draft vocabulary; none when no logit is finite.
std::vector<TreeCandidate> TopCandidates(std::span<const float> logits, std::span<const model::TokenId> vocab_ids,
                                         int32_t top_k);

}  // namespace kvfleet::engine::spec
