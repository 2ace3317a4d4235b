// What a tensor is to an architecture: its name in both formats, its kind
// (a matrix multiplied through, a norm weight, a bias), its shape as a rule
// over the config, and the weight roles it binds to. Most architectures
// follow the Llama family's naming, given here once: llama.cpp's GGUF names
// ("blk.3.attn_q.weight") beside Hugging Face's
// ("model.layers.3.self_attn.q_proj.weight"). An architecture lists the
// specs of its layer (model/arch/<name>/), adding or overriding its own
// (Gemma 3's norms), and everything that needs its tensors reads that
// list: binding (decoder_binding.h), the tiny models, the checkpoint
// export.
//
// A fused tensor (Phi-3's QKV or gate-up) fills several roles, each a run
// of its rows in order; `parts` gives the roles and their row counts.
//
//   std::string n = LayerTensor(ModelFormat::kHuggingFace, 3, names::kAttnQ);
//   int64_t rows = DimSize(names::kAttnQ.rows, config);  // heads × head_dim
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

// A dimension as a rule over the config.
enum class Dim : uint8_t {
  kOne,      // a vector's second dimension
  kVocab,    // vocab_size
  kHidden,   // hidden_size
  kFfn,      // ffn_size
  kQ,        // num_heads × head_dim
  kKv,       // num_kv_heads × head_dim
  kHeadDim,  // head_dim
  kQkv,      // kQ + 2 kKv: fused query, key and value rows
  kGateUp,   // 2 kFfn: fused gate and up rows
};

int64_t DimSize(Dim d, const ModelConfig& c);

enum class TensorKind : uint8_t {
  kMatrix,  // multiplied through: [rows, cols], any weight type
  kNorm,    // an RMSNorm weight [rows]: float, the format's norm offset added
  kBias,    // added to a projection [rows]: float
};

// A layer role a tensor fills (a field of LayerWeights).
using LayerRole = WeightView LayerWeights::*;

// One role of a fused tensor and the rows it takes.
struct TensorPart {
  LayerRole role = nullptr;
  Dim rows = Dim::kOne;
};

struct TensorSpec {
  std::string_view gguf;
  std::string_view hf;  // empty: checkpoints do not carry it (they state it in config.json)
  TensorKind kind = TensorKind::kMatrix;
  Dim rows = Dim::kOne;  // a matrix's output features; a vector's length
  Dim cols = Dim::kOne;  // a matrix's input features
  // The roles it fills: one (parts[0].rows == rows), or a fused tensor's
  // several, in row order. Unused for whole-model tensors.
  std::array<TensorPart, 3> parts{};

  bool fused() const { return parts[1].role != nullptr; }
};

namespace names {
// Whole-model tensors (bound by BindModelTensors).
inline constexpr TensorSpec kTokenEmbd{"token_embd.weight", "model.embed_tokens.weight", TensorKind::kMatrix,
                                       Dim::kVocab, Dim::kHidden};
inline constexpr TensorSpec kOutputNorm{"output_norm.weight", "model.norm.weight", TensorKind::kNorm, Dim::kHidden};
// Absent when the head is tied to the embedding table.
inline constexpr TensorSpec kOutput{"output.weight", "lm_head.weight", TensorKind::kMatrix, Dim::kVocab, Dim::kHidden};
// GGUF only: Llama 3's RoPE frequency factors (decoder_config.h reads them).
inline constexpr TensorSpec kRopeFreqs{"rope_freqs.weight", ""};
// The tensors of a GGUF that are config, not weights (a checkpoint states
// them in config.json): a decoder's, unless its architecture lists its own
// (Architecture::config_tensors).
inline constexpr TensorSpec kDecoderConfigTensors[] = {kRopeFreqs};
inline constexpr TensorSpec kModelTensors[] = {kTokenEmbd, kOutputNorm, kOutput};

// Per layer, after "blk.N." or "model.layers.N.".
inline constexpr TensorSpec kAttnNorm{"attn_norm.weight", "input_layernorm.weight",
                                      TensorKind::kNorm,  Dim::kHidden,
                                      Dim::kOne,          {{{&LayerWeights::attn_norm, Dim::kHidden}}}};
inline constexpr TensorSpec kAttnQ{"attn_q.weight", "self_attn.q_proj.weight",           TensorKind::kMatrix, Dim::kQ,
                                   Dim::kHidden,    {{{&LayerWeights::attn_q, Dim::kQ}}}};
inline constexpr TensorSpec kAttnK{"attn_k.weight",     "self_attn.k_proj.weight",
                                   TensorKind::kMatrix, Dim::kKv,
                                   Dim::kHidden,        {{{&LayerWeights::attn_k, Dim::kKv}}}};
inline constexpr TensorSpec kAttnV{"attn_v.weight",     "self_attn.v_proj.weight",
                                   TensorKind::kMatrix, Dim::kKv,
                                   Dim::kHidden,        {{{&LayerWeights::attn_v, Dim::kKv}}}};
inline constexpr TensorSpec kAttnQBias{"attn_q.bias",     "self_attn.q_proj.bias",
                                       TensorKind::kBias, Dim::kQ,
                                       Dim::kOne,         {{{&LayerWeights::attn_q_bias, Dim::kQ}}}};
inline constexpr TensorSpec kAttnKBias{"attn_k.bias",     "self_attn.k_proj.bias",
                                       TensorKind::kBias, Dim::kKv,
                                       Dim::kOne,         {{{&LayerWeights::attn_k_bias, Dim::kKv}}}};
inline constexpr TensorSpec kAttnVBias{"attn_v.bias",     "self_attn.v_proj.bias",
                                       TensorKind::kBias, Dim::kKv,
                                       Dim::kOne,         {{{&LayerWeights::attn_v_bias, Dim::kKv}}}};
// RMSNorm over each query and key head (Qwen3, Gemma 3).
inline constexpr TensorSpec kAttnQNorm{"attn_q_norm.weight",
                                       "self_attn.q_norm.weight",
                                       TensorKind::kNorm,
                                       Dim::kHeadDim,
                                       Dim::kOne,
                                       {{{&LayerWeights::attn_q_norm, Dim::kHeadDim}}}};
inline constexpr TensorSpec kAttnKNorm{"attn_k_norm.weight",
                                       "self_attn.k_norm.weight",
                                       TensorKind::kNorm,
                                       Dim::kHeadDim,
                                       Dim::kOne,
                                       {{{&LayerWeights::attn_k_norm, Dim::kHeadDim}}}};
inline constexpr TensorSpec kAttnOutput{"attn_output.weight",
                                        "self_attn.o_proj.weight",
                                        TensorKind::kMatrix,
                                        Dim::kHidden,
                                        Dim::kQ,
                                        {{{&LayerWeights::attn_output, Dim::kHidden}}}};
inline constexpr TensorSpec kFfnNorm{"ffn_norm.weight", "post_attention_layernorm.weight",
                                     TensorKind::kNorm, Dim::kHidden,
                                     Dim::kOne,         {{{&LayerWeights::ffn_norm, Dim::kHidden}}}};
inline constexpr TensorSpec kFfnGate{"ffn_gate.weight",   "mlp.gate_proj.weight",
                                     TensorKind::kMatrix, Dim::kFfn,
                                     Dim::kHidden,        {{{&LayerWeights::ffn_gate, Dim::kFfn}}}};
inline constexpr TensorSpec kFfnUp{"ffn_up.weight", "mlp.up_proj.weight", TensorKind::kMatrix,
                                   Dim::kFfn,       Dim::kHidden,         {{{&LayerWeights::ffn_up, Dim::kFfn}}}};
inline constexpr TensorSpec kFfnDown{"ffn_down.weight",   "mlp.down_proj.weight",
                                     TensorKind::kMatrix, Dim::kHidden,
                                     Dim::kFfn,           {{{&LayerWeights::ffn_down, Dim::kHidden}}}};

// The Llama family's layer core (norms, attention, feed-forward). An
// architecture lists the core first and its own tensors after: the tiny
// models draw their random weights in list order, so adding a tensor at
// the end leaves the others' weights as they were.
// The norms after attention and after the feed-forward block (Gemma 3, OLMo-2).
inline constexpr TensorSpec kPostAttnNorm{"post_attention_norm.weight",
                                          "post_attention_layernorm.weight",
                                          TensorKind::kNorm,
                                          Dim::kHidden,
                                          Dim::kOne,
                                          {{{&LayerWeights::post_attn_norm, Dim::kHidden}}}};
inline constexpr TensorSpec kPostFfnNorm{"post_ffw_norm.weight",
                                         "post_feedforward_layernorm.weight",
                                         TensorKind::kNorm,
                                         Dim::kHidden,
                                         Dim::kOne,
                                         {{{&LayerWeights::post_ffn_norm, Dim::kHidden}}}};
inline constexpr TensorSpec kLlamaLayer[] = {kAttnNorm, kAttnQ,   kAttnK, kAttnV,  kAttnOutput,
                                             kFfnNorm,  kFfnGate, kFfnUp, kFfnDown};
}  // namespace names

inline std::string ModelTensor(ModelFormat f, const TensorSpec& n) {
  return std::string(f == ModelFormat::kGguf ? n.gguf : n.hf);
}

inline std::string LayerTensor(ModelFormat f, int64_t layer, const TensorSpec& n) {
  return f == ModelFormat::kGguf ? "blk." + std::to_string(layer) + "." + std::string(n.gguf)
                                 : "model.layers." + std::to_string(layer) + "." + std::string(n.hf);
}

}  // namespace kvfleet::model
