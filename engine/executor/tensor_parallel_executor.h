// A tensor-parallel replica as one executor: one rank executor per rank,
// each over its shard of the model (model::Model::Shard, by the plan of
// model/arch/shard_plan.h), meeting at the layer sequences' collectives
// through an InProcessGroup. The ranks are threads that take turns, so
// they may share a thread pool (the CPU twin) or drive one emulated device
// each (the CUDA emulation); a RankBackend makes each rank's executor.
//
// The CPU twin (cpu/cpu_ranks.h) exists to run the sharded layer
// sequences, the fixed-order sum and the per-rank caches where CI can, and
// is how one replica could span a CPU host's sockets. GPU ranks run at once
// and meet over NCCL instead (cuda/cuda_ranks.h, not yet run on GPUs).
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
// A batch every rank would refuse is refused before any rank starts. A
// rank that fails past that (the twin's fail only when a chaos test says
// so; a GPU's could by a device or communicator error) aborts the group,
// so no rank waits forever, and faults the executor for good: its ranks'
// caches no longer agree, and a half-sharded step is never served.
//
// Thread-safety: one thread at a time, as every executor.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/in_process_group.h"
#include "engine/executor/model_executor.h"
#include "engine/executor/rank_threads.h"
#include "model/arch/shard_plan.h"
#include "model/model.h"

namespace kvfleet::engine {

// How one backend makes a replica's rank executors.
class RankBackend {
 public:
  virtual ~RankBackend() = default;
  // Rank `rank`'s executor over its shard (which outlives it), meeting the
  // others through `collective`. options: the replica's, with the rank's
  // key channel scales and no KV cache yet.
  virtual absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateRank(const model::Model& shard,
                                                                    const ExecutorOptions& options, int32_t rank,
                                                                    Collective& collective) = 0;
  // The backend's numerics identity for the replica's options (the split
  // is added to it).
  virtual std::string Numerics(const ExecutorOptions& options) const = 0;
  // Rank r's own collective, when the backend brings them (NCCL): its
  // ranks then run at once, each on its own device. Null: the ranks take
  // turns on one host (they share a pool, or an emulation) and meet
  // through the replica's in-process group.
  virtual Collective* OwnCollective(int32_t rank) { return nullptr; }
  // Whether the ranks' memory is one pool (the CPU's host memory) or each
  // rank's own device's (GPUs, and the emulation's devices).
  virtual bool RanksShareMemory() const { return true; }
};

class TensorParallelExecutor : public ModelExecutor {
 public:
  // options.tensor_parallel ranks (> 1) of `backend`. INVALID_ARGUMENT,
  // with the degrees that would work, when the model cannot be split that
  // way; a rank's own failure names the rank.
  static absl::StatusOr<std::unique_ptr<TensorParallelExecutor>> Create(const model::Model& model,
                                                                        const ExecutorOptions& options,
                                                                        std::unique_ptr<RankBackend> backend);
  ~TensorParallelExecutor() override;

  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override;
  // Sharing one pool: that pool's. On a device each: what the replica's
  // blocks can take, the device with the least room for its share of a
  // block binding (min over ranks of free / share, times the whole block).
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
  // Each rank holds its share of the adapter (model/lora/shard_lora_adapter.h).
  absl::Status LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) override;
  absl::Status UnloadLora(int32_t slot) override;

  const model::ShardPlan& plan() const { return plan_; }
  // What the ranks' meetings have cost so far (the benchmark's breakdown).
  InProcessGroup::Costs collective_costs() { return group_.costs(); }

 private:
  TensorParallelExecutor(model::ShardPlan plan, std::unique_ptr<RankBackend> backend);

  // Where rank r's piece of a block starts in the whole block.
  size_t PieceOffset(int32_t rank) const;

  model::ShardPlan plan_;
  const model::ModelConfig* whole_config_ = nullptr;  // the whole model's: where adapters are cut
  std::unique_ptr<RankBackend> backend_;              // outlives the ranks it made
  InProcessGroup group_;
  RankThreads threads_;
  std::vector<std::unique_ptr<model::Model>> shards_;
  std::vector<std::unique_ptr<ModelExecutor>> ranks_;
  std::vector<Collective*> collectives_;                // each rank's: their status, and Abort
  bool take_turns_ = true;                              // the ranks meet through group_
  std::vector<absl::StatusOr<ForwardOutput>> outputs_;  // each rank's last step's, kept: a step allocates nothing
  ExecutorInfo info_;
  TensorParallelRankFault injected_;
  int64_t steps_ = 0;
  mutable std::mutex fault_mu_;
  absl::Status fault_;  // under fault_mu_
};

}  // namespace kvfleet::engine
