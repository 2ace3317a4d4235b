// OLMo 2: no norm before attention or the feed-forward block; a norm after
// each instead, on its output before the residual add. The query and key
// are RMS-normalised over the whole projection (every head together), not
// per head, before RoPE (on halves).
//
//   h = x + PostNorm(Wo · Attention(RoPE(QNorm(Wq·x)), RoPE(KNorm(Wk·x)), Wv·x))
//   x = h + PostNorm(Wdown · (silu(Wgate·h) ⊙ Wup·h))
//
// GGUF "olmo2" (llama.cpp's names: attn_q_norm and attn_k_norm of the full
// width, post_attention_norm, post_ffw_norm); Hugging Face
// Olmo2ForCausalLM. Its tokenizer is cl100k's pattern, llama.cpp's
// pre-tokenizer "dbrx".
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/arch/activations.h"
#include "model/arch/decoder_blocks.h"
#include "model/arch/decoder_config.h"
#include "model/arch/tensor_binder.h"
#include "model/arch/tensor_spec.h"

namespace kvfleet::model {

struct Olmo2 {
  static constexpr std::string_view kName = "olmo2";
  static constexpr std::array<std::string_view, 1> kGgufNames = {"olmo2"};
  static constexpr std::array<std::string_view, 1> kHfNames = {"Olmo2ForCausalLM"};
  // The query and key norms span the whole projection.
  static constexpr TensorSpec kAttnQNorm{"attn_q_norm.weight",
                                         "self_attn.q_norm.weight",
                                         TensorKind::kNorm,
                                         Dim::kQ,
                                         Dim::kOne,
                                         {{{&LayerWeights::attn_q_norm, Dim::kQ}}}};
  static constexpr TensorSpec kAttnKNorm{"attn_k_norm.weight",
                                         "self_attn.k_norm.weight",
                                         TensorKind::kNorm,
                                         Dim::kKv,
                                         Dim::kOne,
                                         {{{&LayerWeights::attn_k_norm, Dim::kKv}}}};
  static constexpr TensorSpec kLayerTensorList[] = {
      names::kAttnQ,   names::kAttnK, names::kAttnV,   names::kAttnOutput,   kAttnQNorm,         kAttnKNorm,
      names::kFfnGate, names::kFfnUp, names::kFfnDown, names::kPostAttnNorm, names::kPostFfnNorm};
  static constexpr std::span<const TensorSpec> kLayerTensors = kLayerTensorList;
  static constexpr std::string_view kHfModelType = "olmo2";
  static constexpr RopePairing kGgufRopePairing = RopePairing::kHalves;
  static constexpr float kHfNormOffset = 0.0f;

  static absl::StatusOr<ModelConfig> ReadConfig(const ModelSource& source);
  // ReadConfig's inverse in either format's keys.
  static void WriteConfig(const ModelConfig& config, ModelFormat format, ConfigWriter& writer);
  // Its config at `shape`, with its own defaults (the tiny models').
  static absl::StatusOr<ModelConfig> DefaultConfig(const DecoderShape& shape);

  template <OpSet Ops>
  static void Forward(Ops& ops, const ModelConfig& c, const DecoderWeights& w, const ForwardStep& step,
                      const Activations& a) {
    const int64_t T = step.num_tokens;
    blocks::RunDecoder(ops, c, w, step, a, [&](int32_t l, const LayerWeights& lw) {
      // Attention reads the residual stream itself.
      blocks::ProjectQkv(ops, l, lw, a, T, a.x);
      // Over every head: across the ranks when the heads are split.
      ops.RmsNormAcrossRanks(a.q, lw.attn_q_norm.f32(), a.q, T, c.num_heads * c.head_dim);
      ops.RmsNormAcrossRanks(a.k, lw.attn_k_norm.f32(), a.k, T, c.num_kv_heads * c.head_dim);
      blocks::RotateAndAttend(ops, c, l, a, T);
      blocks::ProjectAttention(ops, l, lw, a, T);
      blocks::NormOutput(ops, c, lw.post_attn_norm, a, T);
      blocks::AddResidual(ops, c, a, T);
      // So does the feed-forward block.
      blocks::FeedForward(ops, c, l, lw, a, T, blocks::Gate::kSilu, a.x);
      blocks::NormOutput(ops, c, lw.post_ffn_norm, a, T);
      blocks::AddResidual(ops, c, a, T);
    });
  }
};

}  // namespace kvfleet::model
