// Llama: Llama 2 and 3.x, SmolLM2, Mistral. Pre-norm decoder layers with
// grouped-query attention and a SwiGLU feed-forward:
//
//   h = x + Wo · Attention(RoPE(Wq·n), RoPE(Wk·n), Wv·n),  n = RmsNorm(x)
//   x = h + Wdown · (silu(Wgate·m) ⊙ Wup·m),              m = RmsNorm(h)
//
// GGUF "llama"; Hugging Face LlamaForCausalLM and MistralForCausalLM. RoPE
// pairs adjacent values in GGUF files (their converter permuted Wq and Wk
// for it) and halves in checkpoints: the same model either way. Llama 3's
// scaled RoPE comes as rope_freqs.weight (GGUF) or rope_scaling "llama3"
// (config.json); Mistral's sliding_window puts every layer on that window.
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

struct Llama {
  static constexpr std::string_view kName = "llama";
  static constexpr std::array<std::string_view, 1> kGgufNames = {"llama"};
  static constexpr std::array<std::string_view, 2> kHfNames = {"LlamaForCausalLM", "MistralForCausalLM"};
  // Every layer tensor it binds (the Llama core).
  static constexpr std::span<const TensorSpec> kLayerTensors = names::kLlamaLayer;
  static constexpr std::string_view kHfModelType = "llama";
  // GGUF files hold Wq and Wk rows permuted for adjacent-pair RoPE.
  static constexpr RopePairing kGgufRopePairing = RopePairing::kAdjacent;
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
      blocks::NormInput(ops, c, lw.attn_norm, a, T);
      blocks::ProjectQkv(ops, l, lw, a, T);
      blocks::RotateAndAttend(ops, c, l, a, T);
      blocks::ProjectAttention(ops, l, lw, a, T);
      blocks::AddResidual(ops, c, a, T);
      blocks::NormInput(ops, c, lw.ffn_norm, a, T);
      blocks::FeedForward(ops, c, l, lw, a, T, blocks::Gate::kSilu);
      blocks::AddResidual(ops, c, a, T);
    });
  }
};

}  // namespace kvfleet::model
