#include "model/arch/llama/llama.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Llama::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) {
    return ReadGgufDecoderConfig(s, kName, kGgufRopePairing, static_cast<int64_t>(kLayerTensors.size()));
  }
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false));
  // Mistral 7B v0.1 attends over a sliding window on every layer (null in later versions).
  if (s.config().Has("sliding_window")) {
    ASSIGN_OR_RETURN(int64_t window, s.config().PositiveInt("sliding_window"));
    if (window < c.context_length) {
      for (LayerAttention& l : c.layers) l.window = window;
    }
  }
  if (s.config().Has("attention_bias")) {
    ASSIGN_OR_RETURN(bool bias, s.config().Bool("attention_bias"));
    if (bias) return s.config().Invalid("attention_bias true is not a Llama kvfleet runs (biases: use qwen2)");
  }
  return c;
}

void Llama::WriteConfig(const ModelConfig& c, ModelFormat f, ConfigWriter& w) {
  if (f == ModelFormat::kGguf) return WriteGgufDecoderConfig(c, kName, w);
  WriteHfDecoderConfig(c, w);
  if (c.max_window() > 0) w.Int("sliding_window", c.max_window());  // Mistral: every layer
}

absl::StatusOr<ModelConfig> Llama::DefaultConfig(const DecoderShape& shape) {
  ModelConfig c = DecoderConfigOf(kName, shape, kGgufRopePairing);
  if (shape.llama3_rope) {
    // Llama 3.1's rope_scaling (factor 8, low 1, high 4) over a quarter of the context.
    c.ropes[0].freq_factors = Llama3FrequencyFactors(shape.rope_theta, c.head_dim, 8.0, 1.0, 4.0,
                                                     static_cast<double>(shape.context_length) / 4);
  }
  return c;
}

}  // namespace kvfleet::model
