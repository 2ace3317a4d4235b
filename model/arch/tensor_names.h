// Tensor names in both formats. Most architectures follow the Llama
// family's naming, given here once: llama.cpp's GGUF names ("blk.3.attn_q.weight")
// beside Hugging Face's ("model.layers.3.self_attn.q_proj.weight"). An
// architecture uses these and adds or overrides its own (Gemma 3's norms).
//
//   std::string n = LayerTensor(ModelFormat::kHuggingFace, 3, names::kAttnQ);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/source/model_source.h"

namespace kvfleet::model {

struct TensorName {
  std::string_view gguf;
  std::string_view hf;
};

namespace names {
// Whole-model tensors.
inline constexpr TensorName kTokenEmbd{"token_embd.weight", "model.embed_tokens.weight"};
inline constexpr TensorName kOutputNorm{"output_norm.weight", "model.norm.weight"};
inline constexpr TensorName kOutput{"output.weight", "lm_head.weight"};
inline constexpr TensorName kRopeFreqs{"rope_freqs.weight", ""};  // GGUF only: Llama 3's frequency factors
// Per layer, after "blk.N." or "model.layers.N.".
inline constexpr TensorName kAttnNorm{"attn_norm.weight", "input_layernorm.weight"};
inline constexpr TensorName kAttnQ{"attn_q.weight", "self_attn.q_proj.weight"};
inline constexpr TensorName kAttnK{"attn_k.weight", "self_attn.k_proj.weight"};
inline constexpr TensorName kAttnV{"attn_v.weight", "self_attn.v_proj.weight"};
inline constexpr TensorName kAttnQBias{"attn_q.bias", "self_attn.q_proj.bias"};
inline constexpr TensorName kAttnKBias{"attn_k.bias", "self_attn.k_proj.bias"};
inline constexpr TensorName kAttnVBias{"attn_v.bias", "self_attn.v_proj.bias"};
inline constexpr TensorName kAttnQNorm{"attn_q_norm.weight", "self_attn.q_norm.weight"};
inline constexpr TensorName kAttnKNorm{"attn_k_norm.weight", "self_attn.k_norm.weight"};
inline constexpr TensorName kAttnOutput{"attn_output.weight", "self_attn.o_proj.weight"};
inline constexpr TensorName kFfnNorm{"ffn_norm.weight", "post_attention_layernorm.weight"};
inline constexpr TensorName kFfnGate{"ffn_gate.weight", "mlp.gate_proj.weight"};
inline constexpr TensorName kFfnUp{"ffn_up.weight", "mlp.up_proj.weight"};
inline constexpr TensorName kFfnDown{"ffn_down.weight", "mlp.down_proj.weight"};

inline constexpr TensorName kModelTensors[] = {kTokenEmbd, kOutputNorm, kOutput};
// The Llama family's layer core (norms, attention, feed-forward).
inline constexpr TensorName kLlamaLayer[] = {kAttnNorm, kAttnQ, kAttnK, kAttnV, kAttnOutput,
                                             kFfnNorm,  kFfnGate, kFfnUp, kFfnDown};
}  // namespace names

inline std::string ModelTensor(ModelFormat f, const TensorName& n) {
  return std::string(f == ModelFormat::kGguf ? n.gguf : n.hf);
}

inline std::string LayerTensor(ModelFormat f, int64_t layer, const TensorName& n) {
  return f == ModelFormat::kGguf ? "blk." + std::to_string(layer) + "." + std::string(n.gguf)
                                 : "model.layers." + std::to_string(layer) + "." + std::string(n.hf);
}

}  // namespace kvfleet::model
