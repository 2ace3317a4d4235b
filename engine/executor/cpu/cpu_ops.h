// The CPU backend's ops for RunLlamaForward (llama_forward.h): each one calls
// a kernels/cpu kernel on host memory, threaded by the executor's pool.
// Weights are read in place from the model file's mapping, or with 8-bit
// activations from their packed copy (q8_packed_weights.h).
//
// Thread-safety: one thread at a time (it owns the RoPE angle scratch).
//
//   CpuOps ops(pool, CpuOps::Config::For(hp, rope_freq_factors), rope_scratch);
//   RunLlamaForward(ops, hp, weights, batch, arrays, activations, kv);
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/rope.h"
#include "kernels/paged_kv.h"
#include "model/llama_hparams.h"
#include "model/llama_weights.h"
#include "engine/executor/forward_batch.h"
#include "engine/executor/cpu/q8_packed_weights.h"
#include "engine/executor/llama_forward.h"

namespace kvfleet::engine {

class CpuOps {
 public:
  struct Config {
    kernels::RopeParams rope;
    float rms_norm_eps = 1e-5f;
    float attention_scale = 1.0f;
    // 8-bit activations and integer dot products for the weights packed
    // here (null: float32 activations everywhere), with the executor's
    // buffer for the quantized tokens (sized for its largest batch, so no
    // step allocates whichever thread runs it).
    const Q8PackedWeights* q8_weights = nullptr;
    kernels::BlockQ8A* q8_scratch = nullptr;

    // freq_factors may be null (the model has none); it must outlive the ops.
    static Config For(const model::LlamaHparams& hp, const float* freq_factors);
  };

  // rope_cos and rope_sin hold [max_tokens, rot_dim / 2] floats each.
  CpuOps(ThreadPool& pool, const Config& config, float* rope_cos, float* rope_sin)
      : pool_(pool), config_(config), rope_cos_(rope_cos), rope_sin_(rope_sin) {}

  // The RoPE angles of the batch's positions, for every layer's Rope.
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
  // logits[i] = head · RmsNorm(x[rows[i]]); `gathered` is [num_rows, hidden] scratch.
  void Logits(const float* x, const int32_t* rows, int64_t num_rows, const float* norm_weight,
              const model::WeightView& head, float* gathered, float* logits);

 private:
  ThreadPool& pool_;
  Config config_;
  float* rope_cos_;
  float* rope_sin_;
};

}  // namespace kvfleet::engine
