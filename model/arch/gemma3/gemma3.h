// Gemma 3 (text): embeddings scaled by √hidden; each layer normalises its
// input, its query and key heads, its attention output and its
// feed-forward output (a "sandwich"), with a tanh-GELU gated feed-forward;
// five of every six layers attend over a sliding window with their own
// RoPE base, the sixth over everything. RoPE pairs halves; one KV head.
//
//   h = x + PostNorm(Wo · Attention(RoPE_l(QNorm(Wq·n)), RoPE_l(KNorm(Wk·n)), Wv·n)),  n = RmsNorm(x)
//   x = h + PostNorm(Wdown · (gelu_tanh(Wgate·m) ⊙ Wup·m)),                           m = RmsNorm(h)
//
// GGUF "gemma3" carries only freq_base (the global base), sliding_window and
// key_length; the rest follows llama.cpp's rules: local base 10,000, layer
// i global iff i % 6 == 5, scores × 1/√head_dim, norm weights used as
// stored (its converter already added the 1 of Gemma's 1 + w). Hugging
// Face Gemma3ForCausalLM states sliding_window_pattern or layer_types,
// rope_local_base_freq and query_pre_attn_scalar, and stores w, so 1 is
// added at load.
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

struct Gemma3 {
  static constexpr std::string_view kName = "gemma3";
  static constexpr std::array<std::string_view, 1> kGgufNames = {"gemma3"};
  static constexpr std::array<std::string_view, 1> kHfNames = {"Gemma3ForCausalLM"};
  // Its own feed-forward input norm (another checkpoint name).
  static constexpr TensorSpec kFfnNorm{"ffn_norm.weight", "pre_feedforward_layernorm.weight",
                                       TensorKind::kNorm, Dim::kHidden,
                                       Dim::kOne,         {{{&LayerWeights::ffn_norm, Dim::kHidden}}}};
  // The Llama core (with its own feed-forward norm), then the head norms
  // and the post-norms.
  static constexpr TensorSpec kLayerTensorList[] = {
      names::kAttnNorm,  names::kAttnQ,        names::kAttnK,      names::kAttnV,   names::kAttnOutput,
      kFfnNorm,          names::kFfnGate,      names::kFfnUp,      names::kFfnDown, names::kAttnQNorm,
      names::kAttnKNorm, names::kPostAttnNorm, names::kPostFfnNorm};
  static constexpr std::span<const TensorSpec> kLayerTensors = kLayerTensorList;
  static constexpr std::string_view kHfModelType = "gemma3_text";
  static constexpr RopePairing kGgufRopePairing = RopePairing::kHalves;
  // Checkpoints store a norm weight w that multiplies by 1 + w; llama.cpp's
  // converter stored 1 + w in the GGUF.
  static constexpr float kHfNormOffset = 1.0f;

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
      blocks::NormInput(ops, c, lw.attn_norm, a, T);
      blocks::ProjectQkv(ops, l, lw, a, T);
      blocks::NormHeads(ops, c, lw, a, T);
      blocks::RotateAndAttend(ops, c, l, a, T);
      blocks::ProjectAttention(ops, l, lw, a, T);
      blocks::NormOutput(ops, c, lw.post_attn_norm, a, T);
      blocks::AddResidual(ops, c, a, T);
      blocks::NormInput(ops, c, lw.ffn_norm, a, T);
      blocks::FeedForward(ops, c, l, lw, a, T, blocks::Gate::kGeluTanh);
      blocks::NormOutput(ops, c, lw.post_ffn_norm, a, T);
      blocks::AddResidual(ops, c, a, T);
    });
  }
};

}  // namespace kvfleet::model
