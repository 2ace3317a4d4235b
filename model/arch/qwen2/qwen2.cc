#include "model/arch/qwen2/qwen2.h"

#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Qwen2::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) {
    return ReadGgufDecoderConfig(s, kName, kGgufRopePairing, static_cast<int64_t>(kLayerTensors.size()));
  }
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false));
  ASSIGN_OR_RETURN(bool sliding, s.config().BoolOr("use_sliding_window", false));
  if (sliding) {
    return s.config().Invalid(
        "use_sliding_window true (a window on some Qwen2 layers) is not supported; kvfleet runs Qwen2 with full "
        "attention, as every released Qwen2 and Qwen2.5 checkpoint is configured");
  }
  return c;
}

void Qwen2::WriteConfig(const ModelConfig& c, ModelFormat f, ConfigWriter& w) {
  if (f == ModelFormat::kGguf) return WriteGgufDecoderConfig(c, kName, w);
  WriteHfDecoderConfig(c, w);
  w.Bool("use_sliding_window", false);
}

absl::StatusOr<ModelConfig> Qwen2::DefaultConfig(const DecoderShape& shape) {
  if (shape.llama3_rope) return absl::InvalidArgumentError("Llama 3's scaled RoPE is for the llama architecture");
  return DecoderConfigOf(kName, shape, kGgufRopePairing);
}

}  // namespace kvfleet::model
