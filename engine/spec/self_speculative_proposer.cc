#include "engine/spec/self_speculative_proposer.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "engine/spec/greedy_drafting.h"

namespace kvfleet::engine::spec {

absl::Status SelfSpeculativeProposer::ValidateLayers(const ExecutorInfo& target, int32_t num_layers) {
  if (num_layers < 1 || num_layers >= target.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("self-speculation needs 1 <= layers < ", target.num_layers,
                                                   " (the model's layer count), got ", num_layers));
  }
  return absl::OkStatus();
}

SelfSpeculativeProposer::SelfSpeculativeProposer(ModelExecutor& target, int32_t num_layers)
    : target_(target), num_layers_(num_layers) {
  const absl::Status valid = ValidateLayers(target.info(), num_layers);
  CHECK(valid.ok()) << valid;
}

absl::Status SelfSpeculativeProposer::Propose(std::span<DraftSlot> slots) {
  std::vector<GreedyDraftSequence> sequences;
  for (DraftSlot& slot : slots) {
    slot.draft.clear();
    if (slot.max_tokens <= 0) continue;
    sequences.push_back(
        {.slot = &slot, .start = slot.num_computed, .block_table = slot.block_table, .lora_slot = slot.lora_slot});
  }
  if (sequences.empty()) return absl::OkStatus();
  return DraftGreedily(target_, num_layers_, sequences);
}

}  // namespace kvfleet::engine::spec
