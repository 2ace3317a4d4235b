#include "model/arch/llama/llama.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Llama::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) return ReadGgufDecoderConfig(s, "llama", RopePairing::kAdjacent);
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

}  // namespace kvfleet::model
