// The Llama-family forward pass, written once over a backend's ops (CpuOps,
// CudaOps). The layer sequence is the same on every backend; only where the
// buffers live and which kernels run differ. Tensor parallelism will add its
// all-reduces here, once, for every backend.
//
// Ops is any type with these members, all over the backend's own memory
// (host for the CPU, device for CUDA), launching or running in order:
//   Prepare(batch, arrays)                          once per pass: RoPE angles, attention plans
//   Embed(table, token_ids, tokens, out)
//   RmsNorm(x, weight, y, rows, n)
//   MatMul(weight_view, x, m, y)
//   AddBias(y, bias, rows, n)
//   Rope(x, tokens, heads)                          at the batch's positions
//   WriteKv(layout, placement, k, v, tokens, k_cache, v_cache)
//   Attention(batch, layout, placement, heads, q, k_cache, v_cache, out)
//   SwiGlu(gate, up, out, count)
//   Add(y, x, count)
//   Logits(x, rows, num_rows, norm_weight, head, gathered, logits)
//
//   RunLlamaForward(ops, hp, weights, batch, arrays, activations, kv);
#pragma once

#include <cstdint>

#include "common/kv_sizing.h"
#include "kernels/paged_kv.h"
#include "model/llama_hparams.h"
#include "model/llama_model.h"
#include "model/llama_weights.h"
#include "engine/executor/forward_batch.h"
#include "engine/executor/model_executor.h"

namespace kvfleet::engine {

// One step's activations in the backend's memory, each sized once for the
// executor's limits (T = max_batch_tokens, R = max_logits_rows).
struct LlamaActivations {
  float* x = nullptr;          // [T, hidden] the residual stream
  float* xn = nullptr;         // [T, hidden] normed
  float* q = nullptr;          // [T, heads × head_dim]
  float* k = nullptr;          // [T, kv_heads × head_dim]
  float* v = nullptr;          // [T, kv_heads × head_dim]
  float* attn = nullptr;       // [T, heads × head_dim]
  float* proj = nullptr;       // [T, hidden]
  float* gate = nullptr;       // [T, ffn]
  float* up = nullptr;         // [T, ffn]
  float* logits_in = nullptr;  // [R, hidden] the rows that want logits
  float* logits = nullptr;     // [R, vocab]
};

// How many floats each activation above needs.
struct LlamaActivationSizes {
  int64_t x, q, kv, ffn, logits_in, logits;

  static LlamaActivationSizes For(const model::LlamaHparams& hp, int64_t max_tokens, int64_t max_logits_rows) {
    return {.x = max_tokens * hp.hidden_size,
            .q = max_tokens * hp.num_heads * hp.head_dim,
            .kv = max_tokens * hp.num_kv_heads * hp.head_dim,
            .ffn = max_tokens * hp.ffn_size,
            .logits_in = max_logits_rows * hp.hidden_size,
            .logits = max_logits_rows * hp.vocab_size};
  }
  int64_t total() const { return 3 * x + 2 * q + 2 * kv + 2 * ffn + logits_in + logits; }

  // The activations laid out one after another from `base` (total() floats);
  // every buffer starts 16-byte aligned when base is and the widths are
  // multiples of 4, as the model's are.
  LlamaActivations Carve(float* base) const {
    float* p = base;
    const auto take = [&p](int64_t n) {
      float* at = p;
      p += n;
      return at;
    };
    return {.x = take(x),
            .xn = take(x),
            .q = take(q),
            .k = take(kv),
            .v = take(kv),
            .attn = take(q),
            .proj = take(x),
            .gate = take(ffn),
            .up = take(ffn),
            .logits_in = take(logits_in),
            .logits = take(logits)};
  }
};

// What every Llama executor reports before its cache exists: the model's
// shape, the options' geometry and limits (logits rows resolved), a float16
// cache's bytes per token. The backend adds its numerics.
inline ExecutorInfo LlamaExecutorInfo(const model::LlamaModel& model, const ExecutorOptions& options) {
  const model::LlamaHparams& hp = model.hparams();
  ExecutorInfo info{.device = options.device,
                    .vocab_size = hp.vocab_size,
                    .context_length = hp.context_length,
                    .block_size = options.block_size,
                    .num_layers = hp.num_layers,
                    .weight_bytes = model.file().file_size(),
                    .kv_bytes_per_token = KvBytesPerToken(hp.kv_shape(), sizeof(uint16_t)),
                    .limits = options.limits};
  info.limits.max_logits_rows = options.limits.logits_rows();
  return info;
}

// The batch's arrays where the backend's kernels read them.
struct BatchArrays {
  const int32_t* token_ids = nullptr;
  const int32_t* logits_tokens = nullptr;
  kernels::TokenPlacement placement;
};

// The per-layer K and V tensors of the cache, in the backend's memory.
struct KvCacheView {
  kernels::KvCacheLayout layout;
  uint16_t* const* k = nullptr;  // [layers] → [num_blocks, kv_heads, block_size, head_dim]
  uint16_t* const* v = nullptr;
};

template <class Ops>
void RunLlamaLayer(Ops& ops, const model::LlamaHparams& hp, const model::LlamaLayerWeights& w,
                   const ForwardBatch& batch, const BatchArrays& arrays, const LlamaActivations& a,
                   const kernels::KvCacheLayout& layout, uint16_t* k_cache, uint16_t* v_cache) {
  const int64_t T = batch.num_tokens(), hidden = hp.hidden_size;
  ops.RmsNorm(a.x, w.attn_norm.f32(), a.xn, T, hidden);
  ops.MatMul(w.attn_q, a.xn, T, a.q);
  ops.MatMul(w.attn_k, a.xn, T, a.k);
  ops.MatMul(w.attn_v, a.xn, T, a.v);
  if (hp.qkv_bias) {
    ops.AddBias(a.q, w.attn_q_bias.f32(), T, w.attn_q.rows);
    ops.AddBias(a.k, w.attn_k_bias.f32(), T, w.attn_k.rows);
    ops.AddBias(a.v, w.attn_v_bias.f32(), T, w.attn_v.rows);
  }
  ops.Rope(a.q, T, hp.num_heads);
  ops.Rope(a.k, T, hp.num_kv_heads);
  ops.WriteKv(layout, arrays.placement, a.k, a.v, T, k_cache, v_cache);
  ops.Attention(batch, layout, arrays.placement, hp.num_heads, a.q, k_cache, v_cache, a.attn);
  ops.MatMul(w.attn_output, a.attn, T, a.proj);
  ops.Add(a.x, a.proj, T * hidden);

  ops.RmsNorm(a.x, w.ffn_norm.f32(), a.xn, T, hidden);
  ops.MatMul(w.ffn_gate, a.xn, T, a.gate);
  ops.MatMul(w.ffn_up, a.xn, T, a.up);
  ops.SwiGlu(a.gate, a.up, a.gate, T * hp.ffn_size);
  ops.MatMul(w.ffn_down, a.gate, T, a.proj);
  ops.Add(a.x, a.proj, T * hidden);
}

// Runs the batch (already validated against the limits) and leaves its
// logits rows in a.logits.
template <class Ops>
void RunLlamaForward(Ops& ops, const model::LlamaHparams& hp, const model::LlamaWeights& w,
                     const ForwardBatch& batch, const BatchArrays& arrays, const LlamaActivations& a,
                     const KvCacheView& kv) {
  const int64_t T = batch.num_tokens();
  ops.Prepare(batch, arrays);
  ops.Embed(w.token_embd, arrays.token_ids, T, a.x);
  const int64_t layers = batch.num_layers > 0 ? batch.num_layers : hp.num_layers;
  for (int64_t l = 0; l < layers; ++l) {
    RunLlamaLayer(ops, hp, w.layers[l], batch, arrays, a, kv.layout, kv.k[l], kv.v[l]);
  }
  if (batch.num_logits_rows() == 0) return;
  ops.Logits(a.x, arrays.logits_tokens, batch.num_logits_rows(), w.output_norm.f32(), w.output, a.logits_in,
             a.logits);
}

}  // namespace kvfleet::engine
