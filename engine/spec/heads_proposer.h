// Draft heads as a proposer ("heads"): each request's guesses come from
// the hidden state that produced its pending token (the target's last row
// for it), through the heads of DraftHeads. No model runs: the cost is the
// heads' matrix-vector products and one pass over the draft vocabulary's
// rows of the output head.
//
// Thread-safety: engine thread only.
//
//   HeadsProposer heads(std::move(loaded), target.info().weight_bytes);
#pragma once

#include "engine/spec/draft_heads.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

class HeadsProposer final : public Proposer {
 public:
  HeadsProposer(DraftHeads heads, int64_t target_weight_bytes);

  std::string_view name() const override { return "heads"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  double relative_cost() const override { return relative_cost_; }
  bool needs_hidden_state() const override { return true; }
  int32_t max_draft_tokens() const override { return heads_.num_heads(); }
  int64_t MemoryBytes() const override { return heads_.bytes(); }

 private:
  DraftHeads heads_;
  double relative_cost_;
};

}  // namespace kvfleet::engine::spec
