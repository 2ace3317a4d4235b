// Binds the tensors of a Llama-family GGUF to named weights, checking every
// shape and type against the hyperparameters. The weights are views into the
// file's mapping: nothing is copied or expanded, so quantized weights stay
// quantized in memory.
//
//   ASSIGN_OR_RETURN(LlamaWeights w, BindLlamaWeights(*gguf, hp));
//   const WeightView& wq = w.layers[0].attn_q;
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "model/gguf/gguf_file.h"
#include "model/llama_hparams.h"

namespace kvfleet::model {

// A matrix is [rows, cols] with cols contiguous (GGUF shape [cols, rows]);
// a vector has rows == 1.
struct WeightView {
  std::string name;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;

  bool present() const { return data != nullptr; }
  const float* f32() const { return static_cast<const float*>(data); }
};

struct LlamaLayerWeights {
  WeightView attn_norm;   // [hidden] F32
  WeightView attn_q;      // [heads·head_dim, hidden]
  WeightView attn_k;      // [kv_heads·head_dim, hidden]
  WeightView attn_v;      // [kv_heads·head_dim, hidden]
  WeightView attn_q_bias, attn_k_bias, attn_v_bias;  // Qwen2 only, F32
  WeightView attn_output; // [hidden, heads·head_dim]
  WeightView ffn_norm;    // [hidden] F32
  WeightView ffn_gate;    // [ffn, hidden]
  WeightView ffn_up;      // [ffn, hidden]
  WeightView ffn_down;    // [hidden, ffn]

  // The seven matrices a token multiplies through in this layer.
  std::array<const WeightView*, 7> Matrices() const {
    return {&attn_q, &attn_k, &attn_v, &attn_output, &ffn_gate, &ffn_up, &ffn_down};
  }
};

struct LlamaWeights {
  WeightView token_embd;   // [vocab, hidden]
  WeightView output_norm;  // [hidden] F32
  WeightView output;       // [vocab, hidden]; the same tensor as token_embd when tied
  WeightView rope_freqs;   // optional [rope_dim / 2] F32
  std::vector<LlamaLayerWeights> layers;
};

// Errors name the file and the tensor: missing, wrong shape (with expected
// and actual), or a type that cannot serve that role.
absl::StatusOr<LlamaWeights> BindLlamaWeights(const GgufFile& file, const LlamaHparams& hp);

}  // namespace kvfleet::model
