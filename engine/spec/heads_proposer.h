// Draft heads as a proposer ("heads"): each request's guesses come from
// the hidden state that produced its pending token (the target's last row
// for it), through the heads of DraftHeads. No model runs: the cost is the
// heads' matrix-vector products and one pass over the draft vocabulary's
// rows of the output head.
//
// With top_k > 1 the guesses are a tree (draft_tree.h): each head's top_k
// tokens, combined best first by the product of their probabilities, so the
// pass verifies the continuations most likely to be kept, not only the one
// most likely at each depth. Every guess carries that product as its
// worth, and the engine keeps as many guesses as pay.
//
// Thread-safety: engine thread only.
//
//   HeadsProposer heads(std::move(loaded), target.info().weight_bytes, /*top_k=*/3);
#pragma once

#include "engine/spec/draft_heads.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

class HeadsProposer final : public Proposer {
 public:
  HeadsProposer(DraftHeads heads, int64_t target_weight_bytes, int32_t top_k = 1);

  std::string_view name() const override { return "heads"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  double relative_cost() const override { return relative_cost_; }
  bool needs_hidden_state() const override { return true; }
  // A chain has one guess per head; a tree as many as the engine allows.
  int32_t max_draft_tokens() const override { return top_k_ > 1 ? INT32_MAX : heads_.num_heads(); }
  // A tree must be built before the engine can pick its best nodes (every
  // head is scored at once, however many are kept); a chain is sized first,
  // from the request's acceptance, so a request whose heads do not pay
  // skips their cost.
  bool drafts_before_sizing() const override { return top_k_ > 1; }
  int64_t MemoryBytes() const override { return heads_.bytes(); }

 private:
  DraftHeads heads_;
  double relative_cost_;
  int32_t top_k_;
};

}  // namespace kvfleet::engine::spec
