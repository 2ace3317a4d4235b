// The CUDA backend's ops for RunLlamaForward (llama_forward.h): each one
// launches a kernels/cuda kernel on the executor's stream, over device
// memory. Launches are asynchronous; the executor checks for errors once per
// pass (cuda::CheckLaunches) when it synchronizes for the logits.
//
// Prepare plans the attention of the batch (attention_plan.h) on the host
// and copies the plan to the device; every layer's Attention reuses it.
//
// Thread-safety: one thread at a time (the engine thread).
//
//   CudaOps ops(stream, config, workspace);
//   RunLlamaForward(ops, hp, device_weights, batch, device_arrays, activations, kv);
//   RETURN_IF_ERROR(ops.status());
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/stream.h"
#include "kernels/paged_kv.h"
#include "model/llama_hparams.h"
#include "model/llama_weights.h"
#include "engine/executor/forward_batch.h"
#include "engine/executor/llama_forward.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

// Device buffers the attention plan is copied into, and the partial results
// of one group of attention work; sized once by the executor.
struct CudaAttentionWorkspace {
  kernels::cuda::AttentionPlan plan;  // host side, reused
  kernels::cuda::AttentionWorkItem* items = nullptr;
  int64_t item_capacity = 0;
  int64_t* partial_offsets = nullptr;  // [max_batch_tokens]
  float* partial_o = nullptr;          // [partial_capacity × heads × head_dim]
  float* partial_ml = nullptr;         // [partial_capacity × heads × 2]
  int64_t partial_capacity = 0;        // (token, partition) pairs

  // The capacities for a model and batch limits, within a workspace budget
  // (but always room for one tile at the end of the context).
  static int64_t PartialsFor(const model::LlamaHparams& hp, int64_t max_tokens, int64_t budget_bytes);
  static int64_t ItemsFor(int64_t max_tokens, int64_t context_length);
  static int64_t BytesFor(const model::LlamaHparams& hp, int64_t max_tokens, int64_t items, int64_t partials);
};

class CudaOps {
 public:
  struct Config {
    kernels::RopeParams rope;     // mode, head_dim, rot_dim
    const float* rope_cos = nullptr;  // device [context_length, rot_dim / 2]
    const float* rope_sin = nullptr;
    float rms_norm_eps = 1e-5f;
    float attention_scale = 1.0f;
    int64_t group = 1;  // query heads per KV head

    static Config For(const model::LlamaHparams& hp, const float* rope_cos, const float* rope_sin);
  };

  CudaOps(::kvfleet::cuda::Stream stream, const Config& config, CudaAttentionWorkspace& workspace)
      : stream_(stream), config_(config), workspace_(workspace) {}

  // The first error of a host-side step (a copy, a plan too large); kernels'
  // errors are the executor's check.
  const absl::Status& status() const { return status_; }

  void Prepare(const ForwardBatch& batch, const BatchArrays& arrays);
  void Embed(const model::WeightView& table, const int32_t* token_ids, int64_t tokens, float* out);
  void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n);
  void MatMul(const model::WeightView& w, const float* x, int64_t m, float* y);
  void AddBias(float* y, const float* bias, int64_t rows, int64_t n);
  void Rope(float* x, int64_t tokens, int64_t heads);
  void WriteKv(const kernels::KvCacheLayout& layout, const kernels::TokenPlacement& where, const float* k,
               const float* v, int64_t tokens, uint16_t* k_cache, uint16_t* v_cache);
  void Attention(const ForwardBatch& batch, const kernels::KvCacheLayout& layout,
                 const kernels::TokenPlacement& where, int64_t heads, const float* q, const uint16_t* k_cache,
                 const uint16_t* v_cache, float* out);
  void SwiGlu(const float* gate, const float* up, float* out, int64_t count);
  void Add(float* y, const float* x, int64_t count);
  void Logits(const float* x, const int32_t* rows, int64_t num_rows, const float* norm_weight,
              const model::WeightView& head, float* gathered, float* logits);

 private:
  ::kvfleet::cuda::Stream stream_;
  Config config_;
  CudaAttentionWorkspace& workspace_;
  const int32_t* positions_ = nullptr;  // device: the batch's, for Rope
  absl::Status status_;
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
