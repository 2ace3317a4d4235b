#include "model/arch/olmo2/olmo2.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {

absl::StatusOr<ModelConfig> Olmo2::ReadConfig(const ModelSource& s) {
  if (s.format() == ModelFormat::kGguf) {
    return ReadGgufDecoderConfig(s, kName, kGgufRopePairing, static_cast<int64_t>(kLayerTensors.size()));
  }
  const ConfigReader& r = s.config();
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false));
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.FloatOr("rms_norm_eps", 1e-5));  // Olmo2Config's default
  ASSIGN_OR_RETURN(std::string act, r.StringOr("hidden_act", "silu"));
  if (act != "silu") return r.Invalid(absl::StrCat("'hidden_act' = '", act, "'; OLMo 2 runs silu"));
  ASSIGN_OR_RETURN(bool bias, r.BoolOr("attention_bias", false));
  if (bias) return r.Invalid("attention_bias true is not supported for OLMo 2 (no released model has it)");
  return c;
}

void Olmo2::WriteConfig(const ModelConfig& c, ModelFormat f, ConfigWriter& w) {
  if (f == ModelFormat::kGguf) return WriteGgufDecoderConfig(c, kName, w);
  WriteHfDecoderConfig(c, w);
  w.String("hidden_act", "silu");
  w.Bool("attention_bias", false);
}

absl::StatusOr<ModelConfig> Olmo2::DefaultConfig(const DecoderShape& shape) {
  if (shape.llama3_rope) return absl::InvalidArgumentError("Llama 3's scaled RoPE is for the llama architecture");
  ModelConfig c = DecoderConfigOf(kName, shape, kGgufRopePairing);
  c.rms_norm_eps = 1e-6;
  return c;
}

}  // namespace kvfleet::model
