// The CPU backend of ModelExecutor for Llama-family models: RunLlamaForward
// over CpuOps (kernels/cpu), threaded across cores, with weights kept in
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

#include "kernels/cpu/quantize_activations.h"

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "model/llama_model.h"
#include "engine/executor/cpu/cpu_ops.h"
#include "engine/executor/llama_forward.h"
#include "engine/executor/model_executor.h"

namespace kvfleet::engine {

// The CPU backend's numerics identity (ExecutorInfo::numerics). Bump the
// version whenever a kernel's arithmetic changes.
inline constexpr char kCpuNumerics[] = "cpu/1";
// With 8-bit activations (--cpu-activations q8): other tokens, another identity.
// Version 2: the panel kernels (one int32 dot per block, one float chain).
inline constexpr char kCpuQ8Numerics[] = "cpu-q8/2";

class CpuExecutor : public ModelExecutor {
 public:
  // options.device must be the CPU.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const model::LlamaModel& model,
                                                             const ExecutorOptions& options);

  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override;
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override;
  absl::Status AllocateKvCache(int64_t num_blocks) override;
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override;

 private:
  CpuExecutor(const model::LlamaModel& model, const ExecutorOptions& options);

  const model::LlamaModel& model_;
  const model::LlamaHparams& hp_;
  ExecutorOptions options_;
  ExecutorInfo info_;
  ThreadPool pool_;
  std::vector<float> rope_freq_factors_;
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
  LlamaActivations activations_;
  float* rope_cos_ = nullptr;  // [max_batch_tokens, rot_dim / 2]
  float* rope_sin_ = nullptr;
  CpuOps::Config ops_config_;
  // Per layer, float16 [num_blocks, kv_heads, block_size, head_dim].
  std::vector<std::unique_ptr<uint16_t[]>> k_cache_, v_cache_;
  std::vector<uint16_t*> k_layers_, v_layers_;
};

}  // namespace kvfleet::engine
