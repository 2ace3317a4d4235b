// The op set: every operation a layer sequence may ask of a backend,
// declared once. A backend's ops class (engine/executor/cpu/cpu_ops.h,
// engine/executor/cuda/cuda_ops.h) satisfies OpSet, checked by a
// static_assert beside it; the op harness (tests/unit/engine/executor/ops/)
// runs a case of every op in kAllOps on every backend, and a test there
// fails when an op here has no case.
//
// A step may mix requests for several LoRA adapters (model/lora/) and the
// base model: AddLora adds, after a projection's product, the low-rank
// change of whichever adapter each row's request runs under; rows of the
// base model and adapters that leave the projection alone get nothing.
//
// Ops work on the backend's memory (host for the CPU, device for CUDA) and
// run or launch in call order. What a step carries besides the activations
// (the batch's token ids, positions and block tables, the KV cache of every
// layer, the RoPE angles, which rows want logits) the backend's ops object
// holds from its construction: a layer sequence only says what to compute.
//
// Under tensor parallelism (shard_plan.h) each rank runs the same layer
// sequence over its share of the weights; AllReduce and AllGather are where
// the ranks meet. With one rank they do nothing, so a layer sequence is
// written once for every degree.
//
// Adding an op: its line in the concept and in kAllOps, its kernels and ops
// method on every backend, its harness case.
//
//   static_assert(model::OpSet<CpuOps>);
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "model/arch/decoder_weights.h"

namespace kvfleet::model {

// One attention call of a layer: the step's queries over that layer's cache.
struct AttentionCall {
  int32_t layer = 0;
  int64_t num_heads = 0;
  float scale = 1.0f;
  // 0: every key up to the query's position; w > 0: keys k with q − k < w.
  int64_t window = 0;
};

// Where a LoRA adapter may change a product: a layer's projection.
struct LoraSite {
  int32_t layer = 0;
  Projection projection = Projection::kAttnQ;
};

// Shapes: rows of `n` floats, row-major; `tokens` is the step's token count.
template <class Ops>
concept OpSet = requires(Ops& ops, const WeightView& w, const float* in, float* out, int64_t n, float s, int32_t index,
                         const AttentionCall& call, const LoraSite& site) {
  ops.Embed(w, n, out);            // out[tokens, w.cols] = rows of table w for the step's tokens (0: not in w's rows)
  ops.RmsNorm(in, in, out, n, n);  // y = x / √(mean(x²) + eps) · weight; (x, weight, y, rows, width)
  ops.RmsNormAcrossRanks(in, in, out, n, n);  // RmsNorm of rows split across the ranks; as RmsNorm
  ops.MatMul(w, in, n, out);                  // y[m, w.rows] = x[m, w.cols] · wᵀ; (w, x, m, y)
  // y[r] += scale · B·A·x[r] for each row under an adapter of the step that changes the site's w; (site, w, x, m, y)
  ops.AddLora(site, w, in, n, out);
  ops.AddBias(out, in, n, n);          // y[r] += bias; (y, bias, rows, width)
  ops.Scale(out, n, s);                // x[i] *= s; (x, count, s)
  ops.Rope(out, n, n, index);          // rotates x[tokens, heads, head_dim]; (x, tokens, heads, rope index)
  ops.WriteKv(index, in, in, n);       // the step's K and V into a layer's cache; (layer, k, v, tokens)
  ops.Attention(call, in, out, n);     // out[tokens, heads, head_dim]; (call, q, out, tokens)
  ops.SwiGlu(in, in, out, n);          // out = silu(gate) · up; (gate, up, out, count)
  ops.GeluTanhMul(in, in, out, n);     // out = gelu_tanh(gate) · up; (gate, up, out, count)
  ops.Silu(in, out, n);                // out = silu(x), out may alias x; (x, out, count)
  ops.Add(out, in, n);                 // y += x; (y, x, count)
  ops.Logits(in, in, w, out, out, n);  // logits of the rows that want them; (x, norm, head, scratch, logits, rows)
  ops.AllReduce(out, n);               // x ← Σ over the replica's ranks, in rank order; (x, count)
  ops.AllGather(out, n, n);  // x[rows, width] → [rows, Σ widths], ranks' columns in order; (x, rows, width)
};

enum class Op {
  kEmbed,
  kRmsNorm,
  kRmsNormAcrossRanks,
  kMatMul,
  kAddLora,
  kAddBias,
  kScale,
  kRope,
  kWriteKv,
  kAttention,
  kSwiGlu,
  kGeluTanhMul,
  kSilu,
  kAdd,
  kLogits,
  kAllReduce,
  kAllGather,
};

inline constexpr std::array kAllOps = {
    Op::kEmbed,  Op::kRmsNorm,   Op::kRmsNormAcrossRanks, Op::kMatMul, Op::kAddLora,     Op::kAddBias, Op::kScale,
    Op::kRope,   Op::kWriteKv,   Op::kAttention,          Op::kSwiGlu, Op::kGeluTanhMul, Op::kSilu,    Op::kAdd,
    Op::kLogits, Op::kAllReduce, Op::kAllGather};

constexpr std::string_view OpName(Op op) {
  switch (op) {
    case Op::kEmbed:
      return "Embed";
    case Op::kRmsNorm:
      return "RmsNorm";
    case Op::kRmsNormAcrossRanks:
      return "RmsNormAcrossRanks";
    case Op::kMatMul:
      return "MatMul";
    case Op::kAddLora:
      return "AddLora";
    case Op::kAddBias:
      return "AddBias";
    case Op::kScale:
      return "Scale";
    case Op::kRope:
      return "Rope";
    case Op::kWriteKv:
      return "WriteKv";
    case Op::kAttention:
      return "Attention";
    case Op::kSwiGlu:
      return "SwiGlu";
    case Op::kGeluTanhMul:
      return "GeluTanhMul";
    case Op::kSilu:
      return "Silu";
    case Op::kAdd:
      return "Add";
    case Op::kLogits:
      return "Logits";
    case Op::kAllReduce:
      return "AllReduce";
    case Op::kAllGather:
      return "AllGather";
  }
  return "?";
}

}  // namespace kvfleet::model
