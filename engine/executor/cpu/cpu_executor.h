// The CPU backend of ModelExecutor: the model's architecture's forward pass
// (model/arch/forward.h) over CpuOps (kernels/cpu), threaded across cores, with weights kept in
// their quantized storage type (read in place from the file's mapping) and
// the KV cache in float16 blocks.
//
// Owns the physical KV cache (per layer, K and V of shape
// [num_blocks, kv_heads, block_size, head_dim]), every activation buffer
// (sized once from the options' limits) and a thread pool. Borrows the model,
// which must outlive it. Create it through CreateExecutor (executor_factory.h).
//
// Thread-safety: one thread at a time.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "engine/executor/cpu/cpu_ops.h"
#include "engine/executor/lora_slots.h"
#include "engine/executor/model_executor.h"
#include "kernels/cpu/quantize_activations.h"
#include "model/arch/forward.h"
#include "model/model.h"

namespace kvfleet::engine {

// The CPU backend's numerics identity (ExecutorInfo::numerics). Bump the
// version whenever a kernel's arithmetic changes.
inline constexpr char kCpuNumerics[] = "cpu/1";
// With 8-bit activations (--cpu-activations q8): other tokens, another identity.
// Version 2: the panel kernels (one int32 dot per block, one float chain).
inline constexpr char kCpuQ8Numerics[] = "cpu-q8/3";

// The identity an executor of these modes reports, KV format included (a
// calibration record's); with options, the key scales' digest too.
std::string CpuNumericsFor(CpuActivations activations, kernels::KvCacheDtype kv);
std::string CpuNumericsFor(const ExecutorOptions& options);

// What a tensor-parallel rank is given besides its shard of the model
// (cpu_ranks.h): its side of the replica's collectives, and the pool
// the ranks share (they take turns). Default: one rank, its own pool.
struct CpuRank {
  Collective* collective = nullptr;
  ThreadPool* shared_pool = nullptr;
};

class CpuExecutor : public ModelExecutor {
 public:
  // options.device must be the CPU.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const model::Model& model, const ExecutorOptions& options,
                                                             CpuRank rank = {});

  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override;
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override;
  absl::Status AllocateKvCache(int64_t num_blocks) override;
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override;
  absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) override;
  absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) override;
  absl::Status MoveKvSlots(std::span<const int64_t> from, std::span<const int64_t> to) override;
  absl::Status LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) override;
  absl::StatusOr<std::span<const float>> RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                       int32_t num_heads) override;
  absl::Status LoadLora(int32_t slot, std::shared_ptr<const model::LoraAdapter> adapter) override;
  absl::Status UnloadLora(int32_t slot) override;

 private:
  CpuExecutor(const model::Model& model, const ExecutorOptions& options, CpuRank rank);

  const model::Model& model_;
  const model::ModelConfig& config_;
  model::ForwardFn<CpuOps> forward_;
  ExecutorOptions options_;
  ExecutorInfo info_;
  std::unique_ptr<ThreadPool> own_pool_;  // null when a tensor-parallel replica shares one
  ThreadPool& pool_;
  // Scratch, uninitialised: the kernels write before they read.
  std::unique_ptr<float[]> scratch_;
  int64_t scratch_floats_ = 0;
  // With 8-bit activations: the packed weights, and the quantized tokens
  // of the largest batch.
  std::unique_ptr<Q8PackedWeights> q8_weights_;
  std::unique_ptr<kernels::BlockQ8A[]> q8_scratch_;
  int64_t q8_scratch_blocks_ = 0;
  int64_t max_k_ = 0;  // the widest matmul input: what the kernels' per-thread scratch is sized for
  // Sizes the calling thread's kernel scratch (every pool thread at start;
  // a thread that calls Forward on its first step).
  void ReserveThreadScratch() const;
  // ReserveThreadScratch on the calling thread, once per thread (Forward's
  // and RunDraftHeads' caller need not be the creator: a worker's engine
  // thread is not).
  void ReserveCallingThreadScratch() const;
  model::Activations activations_;
  float* rope_scratch_ = nullptr;  // CpuOps::Config::RopeScratchFloats(max_batch_tokens)
  CpuOps::Config ops_config_;
  // Per layer, float16 [num_blocks, kv_heads, block_size, head_dim].
  std::vector<std::unique_ptr<uint8_t[]>> k_cache_, v_cache_;
  std::vector<uint8_t*> k_layers_, v_layers_;
  std::vector<float> key_scales_;  // int8_rotated_scaled: KvCacheView::key_scales
  // Draft heads: their weights read in place, their states and logits.
  std::shared_ptr<const model::DraftHeads> draft_heads_;
  std::vector<float> heads_states_, heads_logits_;
  // Resident LoRA adapters, read in place from their host copies.
  LoraSlots lora_slots_;
};

}  // namespace kvfleet::engine
