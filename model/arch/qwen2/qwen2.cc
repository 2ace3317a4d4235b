#include "model/arch/qwen2/qwen2.h"

#include "common/status_macros.h"
#include "model/arch/decoder_binding.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Qwen2::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) return ReadGgufDecoderConfig(s, "qwen2", RopePairing::kHalves);
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false));
  ASSIGN_OR_RETURN(bool sliding, s.config().BoolOr("use_sliding_window", false));
  if (sliding) {
    return s.config().Invalid(
        "use_sliding_window true (a window on some Qwen2 layers) is not supported; kvfleet runs Qwen2 with full "
        "attention, as every released Qwen2 and Qwen2.5 checkpoint is configured");
  }
  return c;
}

absl::StatusOr<DecoderWeights> Qwen2::BindWeights(TensorBinder& b, const ModelConfig& c) {
  const ModelFormat f = b.source().format();
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  ASSIGN_OR_RETURN(DecoderWeights w, BindModelTensors(b, c));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights l, BindLlamaFamilyLayer(b, c, i, {}));
    ASSIGN_OR_RETURN(l.attn_q_bias, b.Vector(LayerTensor(f, i, names::kAttnQBias), q_dim));
    ASSIGN_OR_RETURN(l.attn_k_bias, b.Vector(LayerTensor(f, i, names::kAttnKBias), kv_dim));
    ASSIGN_OR_RETURN(l.attn_v_bias, b.Vector(LayerTensor(f, i, names::kAttnVBias), kv_dim));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace kvfleet::model
