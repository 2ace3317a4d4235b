// The CPU backend's ops (model/arch/op_set.h's concept): each one calls a
// kernels/cpu kernel on host memory, threaded by the executor's pool.
// Weights are read in place from the model file's mapping, or with 8-bit
// activations from their packed copy (q8_packed_weights.h).
//
// An ops object lives for one forward pass: it holds that step's batch
// arrays and KV cache view, and Prepare computes the step's RoPE angles
// (one table per RoPE configuration of the model) for every layer to use.
//
// Thread-safety: one thread at a time (it owns the RoPE angle scratch).
//
//   CpuOps ops(pool, config, {.arrays = HostArrays(batch), .kv = kv, .num_tokens = T}, rope_scratch);
//   ops.Prepare();
//   forward(ops, model_config, weights, step, activations);
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "engine/executor/backend_common.h"
#include "engine/executor/collective.h"
#include "engine/executor/cpu/q8_packed_weights.h"
#include "kernels/common/rope_tables.h"
#include "kernels/cpu/quantize_activations.h"
#include "model/arch/model_config.h"
#include "model/arch/op_set.h"

namespace kvfleet::engine {

class CpuOps {
 public:
  // What stays the same for every step of one model.
  struct Config {
    std::vector<kernels::RopeParams> ropes;  // one per ModelConfig::ropes entry
    float rms_norm_eps = 1e-5f;
    // 8-bit activations and integer dot products for the weights packed
    // here (null: float32 activations everywhere), with the executor's
    // buffer for the quantized tokens (sized for its largest batch, so no
    // step allocates whichever thread runs it).
    const Q8PackedWeights* q8_weights = nullptr;
    kernels::BlockQ8A* q8_scratch = nullptr;
    // A tensor-parallel rank's side of its replica's collectives; null for
    // a model on one rank, where AllReduce and AllGather do nothing.
    Collective* collective = nullptr;

    // The config's RoPE tables point into `model` (its frequency factors), which must outlive the ops.
    static Config For(const model::ModelConfig& model);
    // Floats of RoPE angle scratch a step of `max_tokens` tokens needs.
    int64_t RopeScratchFloats(int64_t max_tokens) const;
  };

  // One forward pass's inputs.
  struct Step {
    BatchArrays arrays;
    KvCacheView kv;
    int64_t num_tokens = 0;
    LoraStep lora;
  };

  // rope_scratch holds Config::RopeScratchFloats(step.num_tokens) floats.
  CpuOps(ThreadPool& pool, const Config& config, const Step& step, float* rope_scratch)
      : pool_(pool), config_(config), step_(step), rope_scratch_(rope_scratch) {}

  // The RoPE angles of the step's positions, for every layer's Rope.
  void Prepare();

  void Embed(const model::WeightView& table, int64_t tokens, float* out);
  void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n);
  // A row of every rank's values together (OLMo 2's query and key norms
  // over every head): this rank's sums of squares and width, added across
  // the ranks, scale its n values. On one rank, RmsNorm itself.
  void RmsNormAcrossRanks(const float* x, const float* weight, float* y, int64_t rows, int64_t n);
  void MatMul(const model::WeightView& w, const float* x, int64_t m, float* y);
  void AddLora(const model::LoraSite& site, const model::WeightView& w, const float* x, int64_t m, float* y);
  void AddBias(float* y, const float* bias, int64_t rows, int64_t n);
  void Scale(float* x, int64_t count, float s);
  void Rope(float* x, int64_t tokens, int64_t heads, int32_t rope);
  void WriteKv(int32_t layer, const float* k, const float* v, int64_t tokens);
  void Attention(const model::AttentionCall& call, const float* q, float* out, int64_t tokens);
  void SwiGlu(const float* gate, const float* up, float* out, int64_t count);
  void Silu(const float* x, float* out, int64_t count);
  void GeluTanhMul(const float* gate, const float* up, float* out, int64_t count);
  void Add(float* y, const float* x, int64_t count);
  // logits[i] = head · RmsNorm(x[logits_tokens[i]]) · norm_weight; `gathered` is [rows, hidden] scratch.
  void Logits(const float* x, const float* norm_weight, const model::WeightView& head, float* gathered, float* logits,
              int64_t rows);
  void AllReduce(float* x, int64_t count);
  void AllGather(float* x, int64_t rows, int64_t width);

 private:
  // The cos and sin tables of RoPE configuration r.
  float* Cos(int32_t r) const;
  float* Sin(int32_t r) const;

  ThreadPool& pool_;
  const Config& config_;
  Step step_;
  float* rope_scratch_;
};

static_assert(model::OpSet<CpuOps>);

}  // namespace kvfleet::engine
