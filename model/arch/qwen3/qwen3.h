// Qwen3 (dense): the Llama layer without biases, with each query and key
// head RMS-normalised over head_dim before RoPE (on halves). head_dim is
// given (128), not hidden / heads.
//
// GGUF "qwen3"; Hugging Face Qwen3ForCausalLM.
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

struct Qwen3 {
  static constexpr std::string_view kName = "qwen3";
  static constexpr std::array<std::string_view, 1> kGgufNames = {"qwen3"};
  static constexpr std::array<std::string_view, 1> kHfNames = {"Qwen3ForCausalLM"};
  // The Llama core, then the query and key head norms.
  static constexpr TensorSpec kLayerTensorList[] = {
      names::kAttnNorm, names::kAttnQ, names::kAttnK,   names::kAttnV,     names::kAttnOutput, names::kFfnNorm,
      names::kFfnGate,  names::kFfnUp, names::kFfnDown, names::kAttnQNorm, names::kAttnKNorm};
  static constexpr std::span<const TensorSpec> kLayerTensors = kLayerTensorList;
  static constexpr std::string_view kHfModelType = "qwen3";
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
      blocks::NormInput(ops, c, lw.attn_norm, a, T);
      blocks::ProjectQkv(ops, l, lw, a, T);
      blocks::NormHeads(ops, c, lw, a, T);
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
