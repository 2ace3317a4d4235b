// A decoder's weights bound by role: what the layer sequences multiply
// through, whatever the architecture called the tensors in the file
// (model/arch/<name>/ binds them). Views into the file's mapping, never
// copies, so quantized weights stay quantized in memory; the few vectors a
// binder had to convert (a bfloat16 norm to float32, Gemma's 1 + w) point
// into storage the Model owns.
//
// A role an architecture does not use is absent (present() is false).
//
//   const WeightView& wq = weights.layers[0].attn_q;
//   int64_t rows = wq.rows;  // output features
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace kvfleet::model {

// A matrix is [rows, cols] with cols contiguous (one output feature per
// row); a vector has rows == 1 and is float32.
struct WeightView {
  std::string name;  // the file's tensor name, for messages
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  // The first vocabulary row a tensor-parallel rank's share of the
  // embedding table or output head holds (rows counts its rows); 0 for a
  // whole table and for every other tensor.
  int64_t first_row = 0;

  bool present() const { return data != nullptr; }
  const float* f32() const { return static_cast<const float*>(data); }
  int64_t bytes() const { return rows * RowBytes(dtype, cols); }
};

// The seven matrices a token multiplies through in a layer, in
// LayerWeights::Matrices() order: what a LoRA adapter may change.
enum class Projection { kAttnQ, kAttnK, kAttnV, kAttnOutput, kFfnGate, kFfnUp, kFfnDown };
inline constexpr int kProjections = 7;

struct LayerWeights {
  WeightView attn_norm;                              // [hidden]
  WeightView attn_q, attn_k, attn_v;                 // [heads·head_dim | kv_heads·head_dim, hidden]
  WeightView attn_q_bias, attn_k_bias, attn_v_bias;  // Qwen2
  WeightView attn_q_norm, attn_k_norm;               // [head_dim], per head (Qwen3, Gemma 3)
  WeightView attn_output;                            // [hidden, heads·head_dim]
  WeightView post_attn_norm;                         // [hidden] on the attention output (Gemma 3)
  WeightView ffn_norm;                               // [hidden]
  WeightView ffn_gate, ffn_up;                       // [ffn, hidden]
  WeightView ffn_down;                               // [hidden, ffn]
  WeightView post_ffn_norm;                          // [hidden] on the feed-forward output (Gemma 3)

  // The seven matrices a token multiplies through in this layer.
  std::array<const WeightView*, kProjections> Matrices() const {
    return {&attn_q, &attn_k, &attn_v, &attn_output, &ffn_gate, &ffn_up, &ffn_down};
  }
  // Every role, present or not (for backends that copy the weights).
  std::array<WeightView*, 16> All() {
    return {&attn_norm,   &attn_q,      &attn_k,      &attn_v,       &attn_q_bias,    &attn_k_bias,
            &attn_v_bias, &attn_q_norm, &attn_k_norm, &attn_output,  &post_attn_norm, &ffn_norm,
            &ffn_gate,    &ffn_up,      &ffn_down,    &post_ffn_norm};
  }
};

struct DecoderWeights {
  WeightView token_embd;   // [vocab, hidden]
  WeightView output_norm;  // [hidden]
  WeightView output;       // [vocab, hidden]; the same tensor as token_embd when tied
  std::vector<LayerWeights> layers;

  // Calls fn(WeightView&) on every present tensor role (a tensor bound to
  // two roles, as a tied head, is visited twice).
  template <typename Fn>
  void ForEach(Fn fn) {
    for (WeightView* v : {&token_embd, &output_norm, &output}) {
      if (v->present()) fn(*v);
    }
    for (LayerWeights& l : layers) {
      for (WeightView* v : l.All()) {
        if (v->present()) fn(*v);
      }
    }
  }
};

}  // namespace kvfleet::model
