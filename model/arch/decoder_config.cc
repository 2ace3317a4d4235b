#include "model/arch/decoder_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/tensor_spec.h"

namespace kvfleet::model {
namespace {

// Every layer attends to all earlier keys and rotates with ropes[0].
void FullAttentionLayers(ModelConfig& c) { c.layers.assign(static_cast<size_t>(c.num_layers), LayerAttention{}); }

}  // namespace

absl::StatusOr<std::vector<float>> ReadFrequencyFactors(const ModelSource& s, const TensorView& t, int64_t dim) {
  if (t.dtype != DType::kF32 || t.shape.size() != 1 || t.shape[0] != dim / 2) {
    return absl::InvalidArgumentError(absl::StrCat(s.path(), ": tensor '", t.name, "' must be F32 [", dim / 2, "]"));
  }
  std::vector<float> f(static_cast<size_t>(dim / 2));
  std::memcpy(f.data(), t.data, f.size() * sizeof(float));
  return f;
}

ModelConfig DecoderConfigOf(std::string_view architecture, const DecoderShape& s, RopePairing pairing) {
  ModelConfig c;
  c.architecture = std::string(architecture);
  c.vocab_size = s.vocab_size;
  c.context_length = s.context_length;
  c.hidden_size = s.hidden_size;
  c.ffn_size = s.ffn_size;
  c.num_layers = s.num_layers;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_dim = s.num_heads > 0 ? s.hidden_size / s.num_heads : 0;
  c.rms_norm_eps = 1e-5;
  c.attention_scale = c.head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(c.head_dim)) : 0.0f;
  c.tied_embeddings = s.tied_embeddings;
  c.ropes = {RopeConfig{.theta = s.rope_theta, .dim = c.head_dim, .pairing = pairing}};
  FullAttentionLayers(c);
  return c;
}

void WriteGgufDecoderConfig(const ModelConfig& c, std::string_view prefix, ConfigWriter& w) {
  const std::string a = std::string(prefix) + ".";
  w.Int(a + "context_length", c.context_length);
  w.Int(a + "embedding_length", c.hidden_size);
  w.Int(a + "feed_forward_length", c.ffn_size);
  w.Int(a + "block_count", c.num_layers);
  w.Int(a + "attention.head_count", c.num_heads);
  w.Int(a + "attention.head_count_kv", c.num_kv_heads);
  w.Int(a + "attention.key_length", c.head_dim);
  w.Int(a + "rope.dimension_count", c.ropes[0].dim);
  w.Float(a + "rope.freq_base", c.ropes[0].theta);
  w.Float(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.Int(a + "vocab_size", c.vocab_size);
  if (c.ropes[0].position_scale != 1.0) {
    w.String(a + "rope.scaling.type", "linear");
    w.Float(a + "rope.scaling.factor", 1.0 / c.ropes[0].position_scale);
  }
  // Llama 3's frequency factors, as llama.cpp's converter writes them (a
  // LongRoPE pair is its architecture's to write).
  if (const RopeConfig& r = c.ropes[0]; !r.freq_factors.empty() && r.long_freq_factors.empty()) {
    w.FloatTensor(names::kRopeFreqs.gguf, r.freq_factors);
  }
}

void WriteHfDecoderConfig(const ModelConfig& c, ConfigWriter& w) {
  w.Int("hidden_size", c.hidden_size);
  w.Int("intermediate_size", c.ffn_size);
  w.Int("num_hidden_layers", c.num_layers);
  w.Int("num_attention_heads", c.num_heads);
  w.Int("num_key_value_heads", c.num_kv_heads);
  w.Int("head_dim", c.head_dim);
  w.Int("max_position_embeddings", c.context_length);
  w.Float("rms_norm_eps", c.rms_norm_eps);
  w.Float("rope_theta", c.ropes[0].theta);
  w.Int("vocab_size", c.vocab_size);
  w.Bool("tie_word_embeddings", c.tied_embeddings);
  if (c.ropes[0].position_scale != 1.0) {
    w.String("rope_scaling.rope_type", "linear");
    w.Float("rope_scaling.factor", 1.0 / c.ropes[0].position_scale);
  }
}

absl::StatusOr<ModelConfig> ReadGgufDecoderConfig(const ModelSource& s, std::string_view prefix, RopePairing pairing,
                                                  int64_t tensors_per_layer) {
  const ConfigReader& r = s.config();
  const std::string a = std::string(prefix) + ".";
  ModelConfig c;
  c.architecture = std::string(prefix);
  c.name = s.name();
  ASSIGN_OR_RETURN(c.context_length, r.PositiveInt(a + "context_length"));
  ASSIGN_OR_RETURN(c.hidden_size, r.PositiveInt(a + "embedding_length"));
  ASSIGN_OR_RETURN(c.ffn_size, r.PositiveInt(a + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_layers, r.PositiveInt(a + "block_count"));
  // Checked against the file before anything is sized by it: a forged
  // block_count must not make the loader reserve gigabytes (found by
  // tests/fuzz/gguf_fuzz.cc; its input is in the corpus).
  if (c.num_layers > static_cast<int64_t>(s.tensors().size()) / std::max<int64_t>(tensors_per_layer, 1)) {
    return r.Invalid(absl::StrCat("block_count ", c.num_layers, " needs at least ", tensors_per_layer,
                                  " tensors per layer, but the file has ", s.tensors().size(), " tensors"));
  }
  ASSIGN_OR_RETURN(c.num_heads, r.PositiveInt(a + "attention.head_count"));
  ASSIGN_OR_RETURN(c.num_kv_heads, r.IntOr(a + "attention.head_count_kv", c.num_heads));
  if (r.Has(a + "attention.key_length")) {
    ASSIGN_OR_RETURN(c.head_dim, r.PositiveInt(a + "attention.key_length"));
  } else if (c.hidden_size % c.num_heads != 0) {
    return r.Invalid(absl::StrCat("embedding_length ", c.hidden_size, " is not a multiple of head_count ",
                                  c.num_heads));
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.FloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  RopeConfig rope{.pairing = pairing};
  ASSIGN_OR_RETURN(rope.dim, r.IntOr(a + "rope.dimension_count", c.head_dim));
  ASSIGN_OR_RETURN(rope.theta, r.FloatOr(a + "rope.freq_base", 10000.0));
  ASSIGN_OR_RETURN(std::string scaling, r.StringOr(a + "rope.scaling.type", "none"));
  if (scaling == "linear") {
    ASSIGN_OR_RETURN(double factor, r.Float(a + "rope.scaling.factor"));
    if (!(factor > 0.0)) return r.Invalid("rope.scaling.factor must be positive");
    rope.position_scale = 1.0 / factor;
  } else if (scaling != "none") {
    return absl::UnimplementedError(absl::StrCat(s.path(), ": RoPE scaling '", scaling,
                                                 "' is not supported (supported: none, linear, llama3)"));
  }
  // Llama 3.1+ GGUFs carry their frequency factors as a tensor instead.
  if (const TensorView* f = s.FindTensor(ModelTensor(ModelFormat::kGguf, names::kRopeFreqs))) {
    ASSIGN_OR_RETURN(rope.freq_factors, ReadFrequencyFactors(s, *f, rope.dim));
  }
  c.ropes = {std::move(rope)};
  FullAttentionLayers(c);

  const TensorView* embd = s.FindTensor(ModelTensor(ModelFormat::kGguf, names::kTokenEmbd));
  if (embd == nullptr) return r.Invalid("tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) return r.Invalid("tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = embd->shape[0];
  if (r.Has(a + "vocab_size")) {
    ASSIGN_OR_RETURN(int64_t declared, r.PositiveInt(a + "vocab_size"));
    if (declared != c.vocab_size) {
      return r.Invalid(absl::StrCat("metadata '", a, "vocab_size' = ", declared,
                                    " disagrees with tensor 'token_embd.weight' rows ", c.vocab_size));
    }
  }
  c.tied_embeddings = s.FindTensor(ModelTensor(ModelFormat::kGguf, names::kOutput)) == nullptr;
  return c;
}

std::vector<float> Llama3FrequencyFactors(double theta, int64_t dim, double factor, double low_freq_factor,
                                          double high_freq_factor, double original_context) {
  const double low_freq_wavelen = original_context / low_freq_factor;
  const double high_freq_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(dim));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

absl::StatusOr<ModelConfig> ReadHfDecoderConfig(const ModelSource& s, bool tied_by_default,
                                                bool rope_scaling_is_callers) {
  const ConfigReader& r = s.config();
  ModelConfig c;
  c.name = s.name();
  ASSIGN_OR_RETURN(c.hidden_size, r.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(c.ffn_size, r.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(c.num_layers, r.PositiveInt("num_hidden_layers", 4096));
  ASSIGN_OR_RETURN(c.num_heads, r.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_kv_heads, r.IntOr("num_key_value_heads", c.num_heads));
  if (r.Has("head_dim")) {
    ASSIGN_OR_RETURN(c.head_dim, r.PositiveInt("head_dim"));
  } else if (c.hidden_size % c.num_heads != 0) {
    return r.Invalid(absl::StrCat("hidden_size ", c.hidden_size, " is not a multiple of num_attention_heads ",
                                  c.num_heads, " and there is no head_dim"));
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  ASSIGN_OR_RETURN(c.context_length, r.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.FloatOr("rms_norm_eps", 1e-6));
  ASSIGN_OR_RETURN(c.vocab_size, r.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(c.tied_embeddings, r.BoolOr("tie_word_embeddings", tied_by_default));
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  RopeConfig rope{.dim = c.head_dim, .pairing = RopePairing::kHalves};
  ASSIGN_OR_RETURN(rope.theta, r.FloatOr("rope_theta", 10000.0));
  if (r.Has("rope_scaling") && !rope_scaling_is_callers) {
    // transformers writes the kind as "rope_type" (older files: "type").
    std::string type = "default";
    if (r.Has("rope_scaling.rope_type")) {
      ASSIGN_OR_RETURN(type, r.String("rope_scaling.rope_type"));
    } else if (r.Has("rope_scaling.type")) {
      ASSIGN_OR_RETURN(type, r.String("rope_scaling.type"));
    }
    if (type == "linear") {
      ASSIGN_OR_RETURN(double factor, r.Float("rope_scaling.factor"));
      if (!(factor > 0.0)) return r.Invalid("rope_scaling.factor must be positive");
      rope.position_scale = 1.0 / factor;
    } else if (type == "llama3") {
      ASSIGN_OR_RETURN(double factor, r.Float("rope_scaling.factor"));
      ASSIGN_OR_RETURN(double low, r.Float("rope_scaling.low_freq_factor"));
      ASSIGN_OR_RETURN(double high, r.Float("rope_scaling.high_freq_factor"));
      ASSIGN_OR_RETURN(double original, r.Float("rope_scaling.original_max_position_embeddings"));
      if (!(factor > 0.0 && low > 0.0 && high > low && original > 0.0)) {
        return r.Invalid("rope_scaling (llama3): factor, low_freq_factor < high_freq_factor and "
                         "original_max_position_embeddings must be positive");
      }
      rope.freq_factors = Llama3FrequencyFactors(rope.theta, rope.dim, factor, low, high, original);
    } else if (type != "default") {
      return absl::UnimplementedError(absl::StrCat(s.path(), ": rope_scaling type '", type,
                                                   "' is not supported (supported: linear, llama3)"));
    }
  }
  c.ropes = {std::move(rope)};
  FullAttentionLayers(c);
  if (!s.tensors().empty()) {
    // What the file holds wins over the flag: a head that is there is used.
    c.tied_embeddings = s.FindTensor(ModelTensor(ModelFormat::kHuggingFace, names::kOutput)) == nullptr;
  }
  return c;
}

}  // namespace kvfleet::model
