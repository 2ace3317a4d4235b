// Phi-3 (Phi-3 mini and medium, Phi-3.5 mini, Phi-4 mini): the Llama layer
// with fused weights. One matrix holds Wq, Wk and Wv (rows in that order),
// one holds Wgate and Wup (gate first); binding cuts each into its parts.
//
//   h = x + Wo · Attention(RoPE(Wq·n), RoPE(Wk·n), Wv·n),  n = RmsNorm(x)
//   x = h + Wdown · (silu(Wgate·m) ⊙ Wup·m),              m = RmsNorm(h)
//
// RoPE pairs halves over the first partial_rotary_factor of each head
// (Phi-4 mini: 3/4). A sliding window, when the model states one shorter
// than its context (Phi-3 mini 4k: 2047), applies to every layer. LongRoPE
// (the 128k models) divides each pair's frequency by a short or a long
// factor and scales cos and sin by an attention factor; the long factors
// rotate when the served context is longer than the trained one
// (original_max_position_embeddings). The choice is made once, by the
// context the worker serves (RopeConfig::FactorsFor), where Hugging Face
// switches on each call by the batch's longest sequence: that would give a
// token different rotations alone and batched.
//
// GGUF "phi3" (llama.cpp's names: attn_qkv, and ffn_up for the fused
// gate-up; the factors as rope_factors_short/long.weight with
// rope.scaling.original_context_length and rope.scaling.attn_factor);
// Hugging Face Phi3ForCausalLM (qkv_proj, gate_up_proj, rope_scaling type
// longrope or su).
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/arch/activations.h"
#include "model/arch/decoder_blocks.h"
#include "model/arch/decoder_config.h"
#include "model/arch/llama/llama.h"
#include "model/arch/tensor_binder.h"
#include "model/arch/tensor_spec.h"

namespace kvfleet::model {

struct Phi3 {
  static constexpr std::string_view kName = "phi3";
  static constexpr std::array<std::string_view, 1> kGgufNames = {"phi3"};
  static constexpr std::array<std::string_view, 1> kHfNames = {"Phi3ForCausalLM"};
  static constexpr TensorSpec kAttnQkv{
      "attn_qkv.weight",
      "self_attn.qkv_proj.weight",
      TensorKind::kMatrix,
      Dim::kQkv,
      Dim::kHidden,
      {{{&LayerWeights::attn_q, Dim::kQ}, {&LayerWeights::attn_k, Dim::kKv}, {&LayerWeights::attn_v, Dim::kKv}}}};
  static constexpr TensorSpec kFfnGateUp{
      "ffn_up.weight",     "mlp.gate_up_proj.weight",
      TensorKind::kMatrix, Dim::kGateUp,
      Dim::kHidden,        {{{&LayerWeights::ffn_gate, Dim::kFfn}, {&LayerWeights::ffn_up, Dim::kFfn}}}};
  static constexpr TensorSpec kLayerTensorList[] = {names::kAttnNorm, kAttnQkv,   names::kAttnOutput,
                                                    names::kFfnNorm,  kFfnGateUp, names::kFfnDown};
  static constexpr std::span<const TensorSpec> kLayerTensors = kLayerTensorList;
  // LongRoPE's divisors (GGUF only: a checkpoint states them in rope_scaling).
  static constexpr TensorSpec kRopeFactorsShort{"rope_factors_short.weight", ""};
  static constexpr TensorSpec kRopeFactorsLong{"rope_factors_long.weight", ""};
  static constexpr TensorSpec kConfigTensors[] = {kRopeFactorsShort, kRopeFactorsLong};
  static constexpr std::string_view kHfModelType = "phi3";
  static constexpr RopePairing kGgufRopePairing = RopePairing::kHalves;
  static constexpr float kHfNormOffset = 0.0f;

  static absl::StatusOr<ModelConfig> ReadConfig(const ModelSource& source);
  // ReadConfig's inverse in either format's keys.
  static void WriteConfig(const ModelConfig& config, ModelFormat format, ConfigWriter& writer);
  // Its config at `shape`, with its own defaults (the tiny models'): 3/4 of
  // each head rotated, every layer on the window, LongRoPE trained at a
  // quarter of the context, so the long factors rotate.
  static absl::StatusOr<ModelConfig> DefaultConfig(const DecoderShape& shape);

  // The Llama layer: its fused tensors were bound as the separate parts.
  template <OpSet Ops>
  static void Forward(Ops& ops, const ModelConfig& c, const DecoderWeights& w, const ForwardStep& step,
                      const Activations& a) {
    Llama::Forward(ops, c, w, step, a);
  }
};

}  // namespace kvfleet::model
