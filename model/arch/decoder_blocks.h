// Pieces of layer sequences that several architectures share, each a few
// op calls over op_set.h's concept. An architecture's Forward composes
// them in its own order (model/arch/<name>/), so each layer sequence reads
// top to bottom and no shared function branches on which model it runs.
//
// Tensor parallelism lives here too: on a rank (shard_plan.h) the config
// and weights are its shares, and the blocks that end in a row-parallel
// product (the attention output, the feed-forward down projection) or read
// the vocabulary (the embedding, the logits) meet the other ranks there.
// An architecture built from these blocks runs at every degree as written.
#pragma once

#include <cstdint>

#include "model/arch/activations.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/op_set.h"

namespace kvfleet::model::blocks {

// a.xn = RmsNorm(a.x) · weight: the input of attention or feed-forward.
template <OpSet Ops>
void NormInput(Ops& ops, const ModelConfig& c, const WeightView& weight, const Activations& a, int64_t T) {
  ops.RmsNorm(a.x, weight.f32(), a.xn, T, c.hidden_size);
}

// out = in · Wᵀ for layer l's projection p, plus the low-rank change of
// each row's adapter (none for the base model's rows).
template <OpSet Ops>
void Project(Ops& ops, int32_t l, Projection p, const WeightView& w, const float* in, int64_t T, float* out) {
  ops.MatMul(w, in, T, out);
  ops.AddLora({.layer = l, .projection = p}, w, in, T, out);
}

// q, k, v = in · W{q,k,v}ᵀ (in: a.xn unless the layer reads the residual itself).
template <OpSet Ops>
void ProjectQkv(Ops& ops, int32_t l, const LayerWeights& w, const Activations& a, int64_t T, const float* in) {
  Project(ops, l, Projection::kAttnQ, w.attn_q, in, T, a.q);
  Project(ops, l, Projection::kAttnK, w.attn_k, in, T, a.k);
  Project(ops, l, Projection::kAttnV, w.attn_v, in, T, a.v);
}
template <OpSet Ops>
void ProjectQkv(Ops& ops, int32_t l, const LayerWeights& w, const Activations& a, int64_t T) {
  ProjectQkv(ops, l, w, a, T, a.xn);
}

// q, k, v += their biases (Qwen2).
template <OpSet Ops>
void AddQkvBiases(Ops& ops, const LayerWeights& w, const Activations& a, int64_t T) {
  ops.AddBias(a.q, w.attn_q_bias.f32(), T, w.attn_q.rows);
  ops.AddBias(a.k, w.attn_k_bias.f32(), T, w.attn_k.rows);
  ops.AddBias(a.v, w.attn_v_bias.f32(), T, w.attn_v.rows);
}

// Each query and key head RMS-normalised over head_dim (Qwen3, Gemma 3).
template <OpSet Ops>
void NormHeads(Ops& ops, const ModelConfig& c, const LayerWeights& w, const Activations& a, int64_t T) {
  ops.RmsNorm(a.q, w.attn_q_norm.f32(), a.q, T * c.num_heads, c.head_dim);
  ops.RmsNorm(a.k, w.attn_k_norm.f32(), a.k, T * c.num_kv_heads, c.head_dim);
}

// RoPE on q and k with the layer's rotation, the step's K/V into the
// layer's cache, then a.attn = attention over it (the layer's window).
template <OpSet Ops>
void RotateAndAttend(Ops& ops, const ModelConfig& c, int32_t layer, const Activations& a, int64_t T) {
  const LayerAttention& la = c.layers[static_cast<size_t>(layer)];
  ops.Rope(a.q, T, c.num_heads, la.rope);
  ops.Rope(a.k, T, c.num_kv_heads, la.rope);
  ops.WriteKv(layer, a.k, a.v, T);
  ops.Attention({.layer = layer, .num_heads = c.num_heads, .scale = c.attention_scale, .window = la.window}, a.q,
                a.attn, T);
}

// a.proj = a.attn · Woᵀ, summed over the ranks' heads.
template <OpSet Ops>
void ProjectAttention(Ops& ops, int32_t l, const LayerWeights& w, const Activations& a, int64_t T) {
  Project(ops, l, Projection::kAttnOutput, w.attn_output, a.attn, T, a.proj);
  ops.AllReduce(a.proj, T * w.attn_output.rows);
}

// a.proj = a.gate · Wdownᵀ, summed over the ranks' feed-forward columns.
template <OpSet Ops>
void ProjectDown(Ops& ops, int32_t l, const LayerWeights& w, const Activations& a, int64_t T) {
  Project(ops, l, Projection::kFfnDown, w.ffn_down, a.gate, T, a.proj);
  ops.AllReduce(a.proj, T * w.ffn_down.rows);
}

// a.proj = down(act(gate · in) · (up · in)), act SiLU or tanh-GELU (in:
// a.xn unless the layer reads the residual itself).
enum class Gate { kSilu, kGeluTanh };
template <OpSet Ops>
void FeedForward(Ops& ops, const ModelConfig& c, int32_t l, const LayerWeights& w, const Activations& a, int64_t T,
                 Gate gate, const float* in) {
  Project(ops, l, Projection::kFfnGate, w.ffn_gate, in, T, a.gate);
  Project(ops, l, Projection::kFfnUp, w.ffn_up, in, T, a.up);
  if (gate == Gate::kSilu) {
    ops.SwiGlu(a.gate, a.up, a.gate, T * c.ffn_size);
  } else {
    ops.GeluTanhMul(a.gate, a.up, a.gate, T * c.ffn_size);
  }
  ProjectDown(ops, l, w, a, T);
}
template <OpSet Ops>
void FeedForward(Ops& ops, const ModelConfig& c, int32_t l, const LayerWeights& w, const Activations& a, int64_t T,
                 Gate gate) {
  FeedForward(ops, c, l, w, a, T, gate, a.xn);
}

// a.proj = RmsNorm(a.proj) · weight (Gemma 3's post-attention and post-feed-forward norms).
template <OpSet Ops>
void NormOutput(Ops& ops, const ModelConfig& c, const WeightView& weight, const Activations& a, int64_t T) {
  ops.RmsNorm(a.proj, weight.f32(), a.proj, T, c.hidden_size);
}

// a.x += a.proj: the residual connection.
template <OpSet Ops>
void AddResidual(Ops& ops, const ModelConfig& c, const Activations& a, int64_t T) {
  ops.Add(a.x, a.proj, T * c.hidden_size);
}

// A decoder's whole pass around its layer: a.x = the step's tokens'
// embedding rows (× the config's embedding scale, when it has one), then
// layer(l, weights of l) for each of the step's layers, then the logits of
// the rows that want them (head · RmsNorm(x) · output_norm). A rank holds a
// slice of the vocabulary: its embedding rows are zeros for the others'
// tokens and sum to the whole row; its logits are its columns, gathered.
template <OpSet Ops, class Layer>
void RunDecoder(Ops& ops, const ModelConfig& c, const DecoderWeights& w, const ForwardStep& step, const Activations& a,
                Layer layer) {
  const int64_t T = step.num_tokens;
  ops.Embed(w.token_embd, T, a.x);
  ops.AllReduce(a.x, T * c.hidden_size);
  if (c.embedding_scale != 1.0f) ops.Scale(a.x, T * c.hidden_size, c.embedding_scale);
  for (int32_t l = 0; l < step.num_layers; ++l) layer(l, w.layers[static_cast<size_t>(l)]);
  if (step.num_logits_rows > 0) {
    ops.Logits(a.x, w.output_norm.f32(), w.output, a.logits_in, a.logits, step.num_logits_rows);
    ops.AllGather(a.logits, step.num_logits_rows, w.output.rows);
  }
}

}  // namespace kvfleet::model::blocks
