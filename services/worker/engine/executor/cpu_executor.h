// The CPU backend of ModelExecutor for Llama-family models: the forward pass
// built from kernels/cpu, threaded across cores, with weights kept in their
// quantized storage type and the KV cache in float16 blocks.
//
// Owns the physical KV cache (per layer, K and V of shape
// [num_blocks, kv_heads, block_size, head_dim]) and a thread pool. Borrows the
// model, which must outlive it.
//
// Thread-safety: one thread at a time.
//
//   CpuExecutorOptions opts{.num_blocks = 64, .block_size = 16, .num_threads = 2};
//   ASSIGN_OR_RETURN(auto ex, CpuExecutor::Create(*model, opts));
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "model/llama_model.h"
#include "services/worker/engine/executor/model_executor.h"

namespace kvfleet::engine {

struct CpuExecutorOptions {
  int64_t num_blocks = 0;   // KV capacity in blocks
  int64_t block_size = 16;  // tokens per block
  int num_threads = 0;      // 0: one per hardware thread

  absl::Status Validate() const;

  // Options whose cache fills `kv_cache_bytes` (DESIGN.md formula at 16-bit),
  // logging the plan: bytes per token, blocks, and how many full-context
  // sequences fit. INVALID_ARGUMENT when not even one block fits.
  static absl::StatusOr<CpuExecutorOptions> ForMemoryBudget(const model::LlamaHparams& hp, int64_t kv_cache_bytes,
                                                            int64_t block_size, int num_threads);
};

class CpuExecutor : public ModelExecutor {
 public:
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const model::LlamaModel& model,
                                                             const CpuExecutorOptions& options);

  const ExecutorInfo& info() const override { return info_; }
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override;

 private:
  struct Scratch;
  CpuExecutor(const model::LlamaModel& model, const CpuExecutorOptions& options);

  absl::Status ValidateBatch(const ForwardBatch& batch) const;
  void RunLayer(int64_t layer, Scratch& s);
  void ComputeLogits(const ForwardBatch& batch, Scratch& s, ForwardOutput& out);

  const model::LlamaModel& model_;
  const model::LlamaHparams& hp_;
  CpuExecutorOptions options_;
  ExecutorInfo info_;
  ThreadPool pool_;
  std::vector<float> rope_freq_factors_;
  // Per layer, float16 [num_blocks, kv_heads, block_size, head_dim].
  std::vector<std::vector<uint16_t>> k_cache_;
  std::vector<std::vector<uint16_t>> v_cache_;
};

}  // namespace kvfleet::engine
