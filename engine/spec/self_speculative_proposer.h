// Self-speculation: the target's own first L layers, followed by its final
// norm and output head, draft; the full model verifies. No second model and
// no second cache: the draft's KV for those L layers is exactly the target's
// (same weights, same tokens), so drafting writes it into the target's own
// blocks, and the verify pass rewrites the same values (LayerSkip-style
// early exit, without its training; acceptance depends on how much the
// model has settled by layer L).
//
//   SelfSpeculativeProposer self(executor, /*num_layers=*/10);
#pragma once

#include "engine/executor/model_executor.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

class SelfSpeculativeProposer final : public Proposer {
 public:
  // CHECK: 1 <= num_layers < the target's layers (ValidateLayers first).
  SelfSpeculativeProposer(ModelExecutor& target, int32_t num_layers);

  // INVALID_ARGUMENT, naming the range, when num_layers cannot draft.
  static absl::Status ValidateLayers(const ExecutorInfo& target, int32_t num_layers);

  std::string_view name() const override { return "self"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  bool uses_target_kv() const override { return true; }
  double relative_cost() const override {
    return static_cast<double>(num_layers_) / static_cast<double>(target_.info().num_layers);
  }

 private:
  ModelExecutor& target_;
  int32_t num_layers_;
};

}  // namespace kvfleet::engine::spec
