#include "model/arch/qwen3/qwen3.h"

#include "common/status_macros.h"
#include "model/arch/decoder_binding.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Qwen3::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) return ReadGgufDecoderConfig(s, "qwen3", RopePairing::kHalves);
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false));
  ASSIGN_OR_RETURN(bool sliding, s.config().BoolOr("use_sliding_window", false));
  ASSIGN_OR_RETURN(bool bias, s.config().BoolOr("attention_bias", false));
  if (sliding) return s.config().Invalid("use_sliding_window true is not supported for Qwen3");
  if (bias) return s.config().Invalid("attention_bias true is not supported for Qwen3 (no released model has it)");
  return c;
}

absl::StatusOr<DecoderWeights> Qwen3::BindWeights(TensorBinder& b, const ModelConfig& c) {
  const ModelFormat f = b.source().format();
  ASSIGN_OR_RETURN(DecoderWeights w, BindModelTensors(b, c));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights l, BindLlamaFamilyLayer(b, c, i, {}));
    ASSIGN_OR_RETURN(l.attn_q_norm, b.Vector(LayerTensor(f, i, names::kAttnQNorm), c.head_dim));
    ASSIGN_OR_RETURN(l.attn_k_norm, b.Vector(LayerTensor(f, i, names::kAttnKNorm), c.head_dim));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace kvfleet::model
