#include "engine/spec/draft_model_proposer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/spec/greedy_drafting.h"

namespace kvfleet::engine::spec {

absl::StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(std::shared_ptr<const void> keep_alive,
                                                                               std::unique_ptr<ModelExecutor> draft,
                                                                               const ExecutorInfo& target) {
  if (draft->info().num_blocks == 0) {
    return absl::FailedPreconditionError("the draft model's executor has no KV cache yet");
  }
  if (draft->info().kv_groups.num_groups() > 1) {
    return absl::InvalidArgumentError(
        "the draft model's executor frees window pages; create it with free_window_blocks off (its pool keeps one "
        "block table per sequence)");
  }
  if (draft->info().vocab_size != target.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the draft model's vocabulary has ", draft->info().vocab_size,
                                                   " tokens and the target's ", target.vocab_size,
                                                   "; a draft must share the target's tokenizer"));
  }
  const double relative_cost =
      target.weight_bytes > 0 ? static_cast<double>(draft->info().weight_bytes) / target.weight_bytes : 1.0;
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(std::move(keep_alive), std::move(draft), relative_cost));
}

DraftModelProposer::DraftModelProposer(std::shared_ptr<const void> keep_alive, std::unique_ptr<ModelExecutor> draft,
                                       double relative_cost)
    : keep_alive_(std::move(keep_alive)),
      draft_(std::move(draft)),
      relative_cost_(relative_cost),
      pool_(static_cast<int32_t>(draft_->info().num_blocks), /*listener=*/nullptr) {}

int32_t DraftModelProposer::BlocksFor(int64_t tokens) const {
  const int64_t size = draft_->info().block_size;
  return static_cast<int32_t>((tokens + size - 1) / size);
}

bool DraftModelProposer::Prepare(Sequence& seq, std::span<const model::TokenId> context, int64_t positions) {
  // The last context token is always run again: its logits give the first guess.
  const size_t shared = std::mismatch(seq.computed.begin(), seq.computed.end(), context.begin(),
                                      context.begin() + static_cast<int64_t>(context.size()) - 1)
                            .first -
                        seq.computed.begin();
  seq.computed.resize(shared);
  while (static_cast<int32_t>(seq.blocks.size()) > std::max(BlocksFor(static_cast<int64_t>(shared)), 0)) {
    pool_.Release(seq.blocks.back());
    seq.blocks.pop_back();
  }
  const int32_t missing = BlocksFor(positions) - static_cast<int32_t>(seq.blocks.size());
  if (missing > pool_.num_free()) return false;
  for (int32_t i = 0; i < missing; ++i) seq.blocks.push_back(*pool_.Allocate());
  return true;
}

absl::Status DraftModelProposer::Propose(std::span<DraftSlot> slots) {
  std::vector<GreedyDraftSequence> batch;
  std::vector<Sequence*> owners;
  for (DraftSlot& slot : slots) {
    slot.draft.clear();
    if (slot.max_tokens <= 0) continue;
    const int64_t positions = static_cast<int64_t>(slot.context.size()) + slot.max_tokens - 1;
    if (positions > draft_->info().context_length) continue;
    Sequence& seq = sequences_[slot.id];
    if (!Prepare(seq, slot.context, positions)) continue;
    batch.push_back({.slot = &slot, .start = static_cast<int32_t>(seq.computed.size()), .block_table = seq.blocks});
    owners.push_back(&seq);
  }
  if (batch.empty()) return absl::OkStatus();
  const absl::Status drafted = DraftGreedily(*draft_, /*num_layers=*/0, batch);
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& seq = *owners[i];
    if (!drafted.ok()) {  // what the failed pass wrote is unknown: start over
      seq.computed.clear();
      continue;
    }
    // Computed now: the whole context, and every guess but the last.
    const DraftSlot& slot = *batch[i].slot;
    seq.computed.assign(slot.context.begin(), slot.context.end());
    seq.computed.insert(seq.computed.end(), slot.draft.begin(), slot.draft.end() - 1);
  }
  return drafted;
}

int64_t DraftModelProposer::RowsBehind(RequestId id, std::span<const model::TokenId> context) const {
  auto it = sequences_.find(id);
  const int64_t computed = it == sequences_.end() ? 0 : static_cast<int64_t>(it->second.computed.size());
  return std::max<int64_t>(0, static_cast<int64_t>(context.size()) - computed);
}

void DraftModelProposer::Forget(RequestId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) pool_.Release(*b);
  sequences_.erase(it);
}

}  // namespace kvfleet::engine::spec
