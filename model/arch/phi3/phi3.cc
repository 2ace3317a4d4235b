#include "model/arch/phi3/phi3.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {
namespace {

constexpr char kGgufWindowKey[] = "phi3.attention.sliding_window";
constexpr char kGgufOriginalContextKey[] = "phi3.rope.scaling.original_context_length";
constexpr char kGgufAttnFactorKey[] = "phi3.rope.scaling.attn_factor";

// LongRoPE's attention factor when the file does not state it, as Hugging
// Face derives it: √(1 + ln(context / trained) / ln(trained)), 1 when the
// context is no longer than the trained one.
double DefaultAttentionFactor(int64_t context, int64_t trained) {
  const double factor = static_cast<double>(context) / static_cast<double>(trained);
  if (factor <= 1.0 || trained < 2) return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(trained)));
}

// A window shorter than the context on every layer; none otherwise (Phi-4
// mini states 0, the 128k models one longer than their context).
void WindowEveryLayer(ModelConfig& c, int64_t window) {
  if (window <= 0 || window >= c.context_length) return;
  for (LayerAttention& l : c.layers) l.window = window;
}

absl::Status CheckLongRope(const ConfigReader& r, const RopeConfig& rope) {
  const size_t pairs = static_cast<size_t>(rope.dim / 2);
  if (rope.freq_factors.size() != pairs || rope.long_freq_factors.size() != pairs) {
    return r.Invalid(absl::StrCat("LongRoPE needs ", pairs, " short and long factors (one per rotated pair); it has ",
                                  rope.freq_factors.size(), " and ", rope.long_freq_factors.size()));
  }
  if (rope.long_factors_above < 1) return r.Invalid("LongRoPE's original context must be positive");
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> FromGguf(const ModelSource& s) {
  const ConfigReader& r = s.config();
  ASSIGN_OR_RETURN(ModelConfig c, ReadGgufDecoderConfig(s, Phi3::kName, Phi3::kGgufRopePairing,
                                                        static_cast<int64_t>(Phi3::kLayerTensors.size())));
  ASSIGN_OR_RETURN(int64_t window, r.IntOr(kGgufWindowKey, 0));
  WindowEveryLayer(c, window);
  const TensorView* short_factors = s.FindTensor(Phi3::kRopeFactorsShort.gguf);
  const TensorView* long_factors = s.FindTensor(Phi3::kRopeFactorsLong.gguf);
  if (short_factors == nullptr && long_factors == nullptr) return c;
  if (short_factors == nullptr || long_factors == nullptr) {
    return r.Invalid("LongRoPE needs both rope_factors_short.weight and rope_factors_long.weight");
  }
  RopeConfig& rope = c.ropes[0];
  ASSIGN_OR_RETURN(rope.freq_factors, ReadFrequencyFactors(s, *short_factors, rope.dim));
  ASSIGN_OR_RETURN(rope.long_freq_factors, ReadFrequencyFactors(s, *long_factors, rope.dim));
  ASSIGN_OR_RETURN(rope.long_factors_above, r.PositiveInt(kGgufOriginalContextKey));
  ASSIGN_OR_RETURN(rope.magnitude,
                   r.FloatOr(kGgufAttnFactorKey, DefaultAttentionFactor(c.context_length, rope.long_factors_above)));
  RETURN_IF_ERROR(CheckLongRope(r, rope));
  return c;
}

absl::StatusOr<ModelConfig> FromHf(const ModelSource& s) {
  const ConfigReader& r = s.config();
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/false, /*rope_scaling_is_callers=*/true));
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.FloatOr("rms_norm_eps", 1e-5));  // Phi3Config's default
  ASSIGN_OR_RETURN(std::string act, r.StringOr("hidden_act", "silu"));
  if (act != "silu") return r.Invalid(absl::StrCat("'hidden_act' = '", act, "'; Phi-3 runs silu"));
  RopeConfig& rope = c.ropes[0];
  ASSIGN_OR_RETURN(double partial, r.FloatOr("partial_rotary_factor", 1.0));
  if (!(partial > 0.0 && partial <= 1.0)) return r.Invalid("partial_rotary_factor must be in (0, 1]");
  // Hugging Face rotates int(head_dim × factor) values (the epsilon keeps a
  // written 0.75 from landing just below its product).
  rope.dim = static_cast<int64_t>(std::min(static_cast<double>(c.head_dim) * partial + 1e-9, 0x1p62));
  if (r.Has("sliding_window")) {
    ASSIGN_OR_RETURN(int64_t window, r.Int("sliding_window"));
    WindowEveryLayer(c, window);
  }
  if (!r.Has("rope_scaling")) return c;
  std::string type = "default";
  for (const char* key : {"rope_scaling.rope_type", "rope_scaling.type"}) {
    if (r.Has(key)) {
      ASSIGN_OR_RETURN(type, r.String(key));
      break;
    }
  }
  if (type == "default") return c;
  if (type != "longrope" && type != "su") {
    return absl::UnimplementedError(absl::StrCat(s.path(), ": rope_scaling type '", type,
                                                 "' is not supported for Phi-3 (supported: longrope, su)"));
  }
  ASSIGN_OR_RETURN(rope.freq_factors, r.FloatList("rope_scaling.short_factor"));
  ASSIGN_OR_RETURN(rope.long_freq_factors, r.FloatList("rope_scaling.long_factor"));
  const char* original_key = r.Has("rope_scaling.original_max_position_embeddings")
                                 ? "rope_scaling.original_max_position_embeddings"
                                 : "original_max_position_embeddings";
  ASSIGN_OR_RETURN(rope.long_factors_above, r.PositiveInt(original_key));
  ASSIGN_OR_RETURN(rope.magnitude, r.FloatOr("rope_scaling.attention_factor",
                                             DefaultAttentionFactor(c.context_length, rope.long_factors_above)));
  RETURN_IF_ERROR(CheckLongRope(r, rope));
  return c;
}

}  // namespace

absl::StatusOr<ModelConfig> Phi3::ReadConfig(const ModelSource& s) {
  return s.format() == ModelFormat::kGguf ? FromGguf(s) : FromHf(s);
}

void Phi3::WriteConfig(const ModelConfig& c, ModelFormat f, ConfigWriter& w) {
  const RopeConfig& rope = c.ropes[0];
  const bool long_rope = !rope.long_freq_factors.empty();
  if (f == ModelFormat::kGguf) {
    WriteGgufDecoderConfig(c, kName, w);
    w.Int(kGgufWindowKey, c.max_window());
    if (long_rope) {
      w.Int(kGgufOriginalContextKey, rope.long_factors_above);
      w.Float(kGgufAttnFactorKey, rope.magnitude);
      w.FloatTensor(kRopeFactorsShort.gguf, rope.freq_factors);
      w.FloatTensor(kRopeFactorsLong.gguf, rope.long_freq_factors);
    }
    return;
  }
  WriteHfDecoderConfig(c, w);
  w.String("hidden_act", "silu");
  w.Float("partial_rotary_factor", static_cast<double>(rope.dim) / static_cast<double>(c.head_dim));
  if (c.max_window() > 0) w.Int("sliding_window", c.max_window());
  if (long_rope) {
    w.Int("original_max_position_embeddings", rope.long_factors_above);
    w.String("rope_scaling.type", "longrope");
    w.FloatList("rope_scaling.short_factor", rope.freq_factors);
    w.FloatList("rope_scaling.long_factor", rope.long_freq_factors);
    w.Float("rope_scaling.attention_factor", rope.magnitude);
  }
}

absl::StatusOr<ModelConfig> Phi3::DefaultConfig(const DecoderShape& shape) {
  if (shape.llama3_rope) return absl::InvalidArgumentError("Llama 3's scaled RoPE is for the llama architecture");
  ModelConfig c = DecoderConfigOf(kName, shape, kGgufRopePairing);
  RopeConfig& rope = c.ropes[0];
  rope.dim = c.head_dim * 3 / 4 / 2 * 2;
  if (rope.dim < 2) return absl::InvalidArgumentError("phi3 needs a head of at least 4 values");
  const int64_t pairs = rope.dim / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    const float x = static_cast<float>(i) / static_cast<float>(pairs);
    rope.freq_factors.push_back(1.0f + 0.25f * x);          // short: near 1
    rope.long_freq_factors.push_back(1.0f + 6.0f * x * x);  // long: the slow pairs stretched
  }
  rope.long_factors_above = std::max<int64_t>(1, shape.context_length / 4);
  rope.magnitude = static_cast<float>(DefaultAttentionFactor(shape.context_length, rope.long_factors_above));
  WindowEveryLayer(c, shape.sliding_window);
  return c;
}

}  // namespace kvfleet::model
