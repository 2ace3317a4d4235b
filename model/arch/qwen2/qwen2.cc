#include "model/arch/qwen2/qwen2.h"

#include "common/status_macros.h"
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

}  // namespace kvfleet::model
