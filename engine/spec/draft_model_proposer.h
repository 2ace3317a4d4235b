// A draft model: a second, cheaper model with the target's vocabulary (a
// smaller sibling, or one `kvfleet make-draft` cut from the target with
// fewer layers or fewer bits) guesses greedily; the target verifies.
//
// The draft keeps its own paged KV cache (its own executor and block pool),
// one block table per request. Before each proposal a request's draft KV is
// cut back to the longest prefix the request still shares with what the
// draft computed (rejected guesses are forgotten there), and caught up on
// the rest in the same batched pass as the other requests. A request whose
// draft KV cannot get blocks simply gets no draft this step.
//
//   ASSIGN_OR_RETURN(auto draft, DraftModelProposer::Create(std::move(model), std::move(executor), target_info));
#pragma once

#include <memory>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"
#include "engine/kv/block_pool.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

class DraftModelProposer final : public Proposer {
 public:
  // `keep_alive` owns whatever the executor borrows (the draft's weights).
  // INVALID_ARGUMENT when the draft's vocabulary differs from the target's.
  static absl::StatusOr<std::unique_ptr<DraftModelProposer>> Create(std::shared_ptr<const void> keep_alive,
                                                                    std::unique_ptr<ModelExecutor> draft,
                                                                    const ExecutorInfo& target);

  std::string_view name() const override { return "draft"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  void Forget(RequestId id) override;
  double relative_cost() const override { return relative_cost_; }
  int64_t RowsBehind(RequestId id, std::span<const model::TokenId> context) const override;

  // Blocks of the draft's cache in use, for tests.
  int32_t blocks_in_use() const { return pool_.Stats().used; }

 private:
  struct Sequence {
    std::vector<BlockId> blocks;
    std::vector<model::TokenId> computed;  // tokens whose draft KV is in `blocks`, in order
  };

  DraftModelProposer(std::shared_ptr<const void> keep_alive, std::unique_ptr<ModelExecutor> draft,
                     double relative_cost);
  int32_t BlocksFor(int64_t tokens) const;
  // Cuts the draft KV back to what `context` still shares, and grows the
  // blocks to cover `positions`. False (and the sequence keeps what it had)
  // when the pool is short.
  bool Prepare(Sequence& seq, std::span<const model::TokenId> context, int64_t positions);

  std::shared_ptr<const void> keep_alive_;
  std::unique_ptr<ModelExecutor> draft_;
  double relative_cost_;  // the draft's weight bytes over the target's
  BlockPool pool_;
  absl::node_hash_map<RequestId, Sequence> sequences_;  // pointers stay valid across inserts
};

}  // namespace kvfleet::engine::spec
