#include "tools/tiny_model/tiny_model.h"

#include <cmath>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quantize.h"
#include "model/arch/architecture_registry.h"
#include "model/gguf/gguf_config_writer.h"
#include "tools/tiny_model/tiny_vocabulary.h"

namespace kvfleet::tools {
namespace {

// Deterministic on every platform: std::mt19937_64 is fully specified, the
// standard distributions are not, so values are derived from raw bits here.
class Random {
 public:
  explicit Random(uint64_t seed) : gen_(seed) {}
  float Uniform(float lo, float hi) {
    const double u = static_cast<double>(gen_() >> 11) * 0x1.0p-53;
    return static_cast<float>(lo + (hi - lo) * u);
  }

 private:
  std::mt19937_64 gen_;
};

std::vector<uint8_t> Encode(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(RowBytes(dtype, static_cast<int64_t>(values.size())));
  kernels::QuantizeRow(dtype, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  return bytes;
}

void AddMatrix(model::GgufWriter& w, Random& rng, const std::string& name, int64_t rows, int64_t cols,
               DType dtype) {
  // Scale like a trained model's fan-in so activations stay O(1).
  const float a = 1.7f / std::sqrt(static_cast<float>(cols));
  std::vector<float> v(rows * cols);
  for (float& x : v) x = rng.Uniform(-a, a);
  w.AddTensor(name, {cols, rows}, dtype, Encode(dtype, v));
}

// A bias: small, either sign (Qwen2's).
void AddBias(model::GgufWriter& w, Random& rng, const std::string& name, int64_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform(-0.5f, 0.5f);
  w.AddTensor(name, {n}, DType::kF32, Encode(DType::kF32, v));
}

void AddNorm(model::GgufWriter& w, Random& rng, const std::string& name, int64_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform(0.8f, 1.2f);
  w.AddTensor(name, {n}, DType::kF32, Encode(DType::kF32, v));
}

}  // namespace

int64_t TinyVocabSize() { return static_cast<int64_t>(MakeTinyVocabulary().tokens.size()); }

TinyModelOptions ShapedForType(TinyModelOptions o) {
  if (!IsKQuant(o.dtype)) return o;
  const int64_t head_dim = o.hidden_size / o.num_heads;
  o.hidden_size = RoundUpToBlock(o.dtype, o.hidden_size);
  o.ffn_size = RoundUpToBlock(o.dtype, o.ffn_size);
  o.num_heads = o.hidden_size / head_dim;
  while (o.num_heads % o.num_kv_heads != 0) ++o.num_kv_heads;
  return o;
}

model::DecoderShape TinyModelOptions::Shape() const {
  return {.vocab_size = vocab_size,
          .context_length = context_length,
          .hidden_size = hidden_size,
          .ffn_size = ffn_size,
          .num_layers = num_layers,
          .num_heads = num_heads,
          .num_kv_heads = num_kv_heads,
          .rope_theta = rope_theta,
          .sliding_window = sliding_window,
          .tied_embeddings = tied_embeddings,
          .llama3_rope = llama3_rope};
}

absl::Status TinyModelOptions::Validate() const {
  auto bad = [](absl::string_view what) { return absl::InvalidArgumentError(absl::StrCat("tiny model: ", what)); };
  const model::Architecture* arch = model::FindArchitectureByName(architecture);
  if (arch == nullptr) {
    return bad(absl::StrCat("architecture '", architecture, "' (", TinyArchitectureNames(), ")"));
  }
  if (sliding_window < 1) return bad("sliding_window must be >= 1");
  if (num_layers < 1) return bad("num_layers must be >= 1");
  if (hidden_size < 32 || hidden_size % 32 != 0) return bad("hidden_size must be a positive multiple of 32");
  if (ffn_size < 32 || ffn_size % 32 != 0) return bad("ffn_size must be a positive multiple of 32");
  if (num_heads < 1 || hidden_size % num_heads != 0) return bad("num_heads must divide hidden_size");
  if (num_kv_heads < 1 || num_heads % num_kv_heads != 0) return bad("num_kv_heads must divide num_heads");
  if ((hidden_size / num_heads) % 8 != 0) return bad("head dimension must be a multiple of 8");
  if (context_length < 1) return bad("context_length must be >= 1");
  const int64_t block = Traits(dtype).block_elems;
  if (hidden_size % block != 0 || ffn_size % block != 0) {
    return bad(absl::StrCat(DTypeName(dtype), " rows are whole blocks of ", block,
                            ": hidden_size and ffn_size must be multiples of it (see ShapedForType)"));
  }
  if (vocab_size != 0 && vocab_size < TinyVocabSize()) {
    return bad(absl::StrCat("vocab_size must be 0 or at least the tiny vocabulary's ", TinyVocabSize(), " tokens"));
  }
  if (absl::Status s = arch->default_config(Shape()).status(); !s.ok()) return bad(s.message());
  return absl::OkStatus();
}

std::string TinyArchitectureNames() {
  std::string out;
  for (const model::Architecture& a : model::Architectures())
    absl::StrAppend(&out, out.empty() ? "" : ", ", std::string(a.name));
  return out;
}

absl::Status BuildTinyModel(const TinyModelOptions& o, model::GgufWriter& w) {
  RETURN_IF_ERROR(o.Validate());
  TinyVocabulary vocab = MakeTinyVocabulary();
  for (int64_t i = static_cast<int64_t>(vocab.tokens.size()); i < o.vocab_size; ++i) {
    vocab.tokens.push_back(absl::StrCat("<|unused_", i, "|>"));
    vocab.token_types.push_back(5);  // unused
  }
  const model::Architecture& arch = *model::FindArchitectureByName(o.architecture);
  model::DecoderShape shape = o.Shape();
  shape.vocab_size = static_cast<int64_t>(vocab.tokens.size());
  ASSIGN_OR_RETURN(const model::ModelConfig c, arch.default_config(shape));
  w.SetString("general.architecture", o.architecture);
  w.SetString("general.name", absl::StrCat("kvfleet tiny ", o.architecture == "llama" ? "" : o.architecture + " ",
                                           DTypeName(o.dtype), " seed ", o.seed));
  model::GgufConfigWriter config(w);
  arch.write_config(c, model::ModelFormat::kGguf, config);
  AddTinyVocabulary(vocab, w);

  // Every tensor from the architecture's specs, drawn in their order:
  // the embeddings, each layer's, the output norm and head.
  Random rng(o.seed);
  const auto add = [&](const model::TensorSpec& spec, const std::string& name) {
    const int64_t rows = model::DimSize(spec.rows, c);
    switch (spec.kind) {
      case model::TensorKind::kMatrix:
        AddMatrix(w, rng, name, rows, model::DimSize(spec.cols, c), o.dtype);
        break;
      case model::TensorKind::kNorm:
        AddNorm(w, rng, name, rows);
        break;
      case model::TensorKind::kBias:
        AddBias(w, rng, name, rows);
        break;
    }
  };
  add(model::names::kTokenEmbd, std::string(model::names::kTokenEmbd.gguf));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (const model::TensorSpec& spec : arch.layer_tensors) {
      add(spec, model::LayerTensor(model::ModelFormat::kGguf, l, spec));
    }
  }
  add(model::names::kOutputNorm, std::string(model::names::kOutputNorm.gguf));
  if (!c.tied_embeddings) add(model::names::kOutput, std::string(model::names::kOutput.gguf));
  return absl::OkStatus();
}

std::string TinyHfConfigExtras(const TinyModelOptions& o) {
  if (!o.llama3_rope) return "{}";
  return absl::StrCat(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, )",
                      R"("high_freq_factor": 4.0, "original_max_position_embeddings": )", o.context_length / 4, "}}");
}

absl::Status WriteTinyModel(const TinyModelOptions& options, const std::string& path) {
  model::GgufWriter w;
  RETURN_IF_ERROR(BuildTinyModel(options, w));
  return w.WriteFile(path);
}

}  // namespace kvfleet::tools
