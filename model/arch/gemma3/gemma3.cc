#include "model/arch/gemma3/gemma3.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/float16.h"
#include "common/status_macros.h"
#include "model/arch/decoder_config.h"

namespace kvfleet::model {
namespace {

constexpr double kLocalRopeBase = 10000.0;  // llama.cpp's rule for GGUF files, which do not state it
constexpr int64_t kSlidingWindowPattern = 6;
constexpr char kGgufWindowKey[] = "gemma3.attention.sliding_window";

// Layers `global` says are global attend to everything with ropes[0];
// the others attend over `window` with ropes[1].
template <typename IsGlobal>
void SlidingLayers(ModelConfig& c, int64_t window, IsGlobal global) {
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.layers[static_cast<size_t>(i)] = global(i) ? LayerAttention{} : LayerAttention{.window = window, .rope = 1};
  }
}

RopeConfig LocalRope(const RopeConfig& global, double base) {
  return {.theta = base, .dim = global.dim, .pairing = global.pairing};
}

absl::StatusOr<ModelConfig> FromGguf(const ModelSource& s) {
  const ConfigReader& r = s.config();
  ASSIGN_OR_RETURN(ModelConfig c, ReadGgufDecoderConfig(s, Gemma3::kName, Gemma3::kGgufRopePairing,
                                                        static_cast<int64_t>(Gemma3::kLayerTensors.size())));
  ASSIGN_OR_RETURN(int64_t window, r.PositiveInt(kGgufWindowKey));
  // llama.cpp: the 27B (62 layers) scales scores by 1/√(hidden / heads), the others by 1/√head_dim.
  const int64_t scale_dim = c.num_layers == 62 ? c.hidden_size / c.num_heads : c.head_dim;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scale_dim));
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.ropes.push_back(LocalRope(c.ropes[0], kLocalRopeBase));
  SlidingLayers(c, window, [](int64_t i) { return i % kSlidingWindowPattern == kSlidingWindowPattern - 1; });
  return c;
}

absl::StatusOr<ModelConfig> FromHf(const ModelSource& s) {
  const ConfigReader& r = s.config();
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfDecoderConfig(s, /*tied_by_default=*/true));
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (r.Has(key)) return r.Invalid(absl::StrCat("'", key, "' is set; kvfleet's Gemma 3 has no logit soft-capping"));
  }
  const std::string act_key = r.Has("hidden_activation") ? "hidden_activation" : "hidden_act";
  ASSIGN_OR_RETURN(std::string act, r.StringOr(act_key, "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") {
    return r.Invalid(absl::StrCat("'", act_key, "' = '", act, "'; Gemma 3 runs gelu_pytorch_tanh"));
  }
  ASSIGN_OR_RETURN(double pre_attn, r.FloatOr("query_pre_attn_scalar", static_cast<double>(c.head_dim)));
  if (!(pre_attn > 0.0)) return r.Invalid("query_pre_attn_scalar must be positive");
  c.attention_scale = static_cast<float>(1.0 / std::sqrt(pre_attn));
  // transformers multiplies by √hidden rounded to the weights' dtype.
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  ASSIGN_OR_RETURN(std::string dtype, r.StringOr("torch_dtype", "float32"));
  if (dtype == "bfloat16") c.embedding_scale = Bf16ToFloat(FloatToBf16(c.embedding_scale));
  if (dtype == "float16") c.embedding_scale = HalfToFloat(FloatToHalf(c.embedding_scale));

  ASSIGN_OR_RETURN(double local_base, r.FloatOr("rope_local_base_freq", kLocalRopeBase));
  c.ropes.push_back(LocalRope(c.ropes[0], local_base));
  ASSIGN_OR_RETURN(int64_t window, r.PositiveInt("sliding_window"));
  if (r.Has("layer_types")) {
    ASSIGN_OR_RETURN(std::vector<std::string> types, r.StringList("layer_types"));
    if (static_cast<int64_t>(types.size()) != c.num_layers) {
      return r.Invalid(absl::StrCat("layer_types has ", types.size(), " entries for ", c.num_layers, " layers"));
    }
    for (const std::string& t : types) {
      if (t != "full_attention" && t != "sliding_attention") {
        return r.Invalid(absl::StrCat("layer_types: '", t, "' (known: full_attention, sliding_attention)"));
      }
    }
    SlidingLayers(c, window, [&](int64_t i) { return types[static_cast<size_t>(i)] == "full_attention"; });
  } else {
    ASSIGN_OR_RETURN(int64_t pattern, r.IntOr("sliding_window_pattern", kSlidingWindowPattern));
    if (pattern < 1) return r.Invalid("sliding_window_pattern must be positive");
    SlidingLayers(c, window, [&](int64_t i) { return (i + 1) % pattern == 0; });
  }
  return c;
}

}  // namespace

absl::StatusOr<ModelConfig> Gemma3::ReadConfig(const ModelSource& s) {
  return s.format() == ModelFormat::kGguf ? FromGguf(s) : FromHf(s);
}

void Gemma3::WriteConfig(const ModelConfig& c, ModelFormat f, ConfigWriter& w) {
  if (f == ModelFormat::kGguf) {
    WriteGgufDecoderConfig(c, kName, w);
    w.Int(kGgufWindowKey, c.max_window());
    return;
  }
  WriteHfDecoderConfig(c, w);
  w.Int("sliding_window", c.max_window());
  w.Float("rope_local_base_freq", c.ropes[1].theta);
  w.Int("query_pre_attn_scalar", std::lround(1.0 / (double{c.attention_scale} * c.attention_scale)));
  w.String("hidden_activation", "gelu_pytorch_tanh");
  std::vector<std::string> types;
  for (const LayerAttention& l : c.layers) types.push_back(l.window > 0 ? "sliding_attention" : "full_attention");
  w.StringList("layer_types", types);
}

absl::StatusOr<ModelConfig> Gemma3::DefaultConfig(const DecoderShape& shape) {
  if (shape.llama3_rope) return absl::InvalidArgumentError("Llama 3's scaled RoPE is for the llama architecture");
  if (shape.sliding_window < 1) return absl::InvalidArgumentError("gemma3 needs a sliding window of at least 1");
  DecoderShape global = shape;
  global.rope_theta = 1e6;  // the global layers' base, beside the local 10,000
  ModelConfig c = DecoderConfigOf(kName, global, kGgufRopePairing);
  c.rms_norm_eps = 1e-6;
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.ropes.push_back(LocalRope(c.ropes[0], kLocalRopeBase));
  SlidingLayers(c, shape.sliding_window,
                [](int64_t i) { return i % kSlidingWindowPattern == kSlidingWindowPattern - 1; });
  return c;
}

}  // namespace kvfleet::model
