// The CPU twin of a tensor-parallel replica: one CpuExecutor per rank, each
// over its shard of the model (model::Model::Shard, by the plan of
// model/arch/shard_plan.h), meeting at the layer sequences' collectives
// through an InProcessGroup. The ranks are threads that take turns and
// share one thread pool, so on a small machine the twin costs about what
// the whole model does, plus the collectives; it exists to run the sharded
// layer sequences, the fixed-order sum and the per-rank caches where CI
// can, and is how one replica could span a CPU host's sockets.
//
// To the engine it is one executor: one block table, each block holding
// every rank's share of its KV heads (kv_block_bytes is the ranks' sum, and
// a block copied out is the ranks' pieces in rank order), the whole
// vocabulary's logits, and a numerics identity that names the split
// ("cpu/1+tp2"): tokens are identical at a given degree, close across
// degrees.
//
// Draft heads run on rank 0 (their weights are not sharded).
//
// A rank that fails mid-step (the twin's ranks fail only when a chaos test
// says so; a GPU's could by a device or communicator error) aborts the
// group, so no rank waits forever, and faults the executor for good: its
// ranks' caches no longer agree, and a half-sharded step is never served.
//
// Thread-safety: one thread at a time, as every executor.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "engine/executor/cpu/cpu_executor.h"
#include "engine/executor/in_process_group.h"
#include "engine/executor/model_executor.h"
#include "engine/executor/rank_threads.h"
#include "model/arch/shard_plan.h"
#include "model/model.h"

namespace kvfleet::engine {

class CpuTpExecutor : public ModelExecutor {
 public:
  // options.tensor_parallel ranks (> 1) on the CPU. INVALID_ARGUMENT, with
  // the degrees that would work, when the model cannot be split that way.
  static absl::StatusOr<std::unique_ptr<CpuTpExecutor>> Create(const model::Model& model,
                                                               const ExecutorOptions& options);
  ~CpuTpExecutor() override;

  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override;
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override;
  absl::Status AllocateKvCache(int64_t num_blocks) override;
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override;
  absl::Status Fault() const override;
  absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) override;
  absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) override;
  absl::Status MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) override;
  absl::Status LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) override;
  absl::StatusOr<std::span<const float>> RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                       int32_t num_heads) override;

  const model::ShardPlan& plan() const { return plan_; }
  // What the ranks' meetings have cost so far (the benchmark's breakdown).
  InProcessGroup::Costs collective_costs() { return group_.costs(); }

 private:
  CpuTpExecutor(model::ShardPlan plan, const ExecutorOptions& options);

  // Each rank's piece of one block: [offset, offset + bytes) of the whole.
  std::span<uint8_t> Piece(std::span<uint8_t> block, int32_t rank) const;

  model::ShardPlan plan_;
  ThreadPool pool_;  // the ranks', in turn
  InProcessGroup group_;
  RankThreads threads_;
  std::vector<std::unique_ptr<model::Model>> shards_;
  std::vector<std::unique_ptr<CpuExecutor>> ranks_;
  ExecutorInfo info_;
  TensorParallelRankFault injected_;
  int64_t steps_ = 0;
  mutable std::mutex fault_mu_;
  absl::Status fault_;  // under fault_mu_
};

}  // namespace kvfleet::engine
