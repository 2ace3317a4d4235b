#include "tools/tiny_model/tiny_model.h"

#include <cmath>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quantize.h"
#include "model/arch/decoder_config.h"
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

absl::Status TinyModelOptions::Validate() const {
  auto bad = [](absl::string_view what) { return absl::InvalidArgumentError(absl::StrCat("tiny model: ", what)); };
  if (architecture != "llama" && architecture != "qwen2" && architecture != "qwen3" && architecture != "gemma3") {
    return bad(absl::StrCat("architecture '", architecture, "' (llama, qwen2, qwen3, gemma3)"));
  }
  if (sliding_window < 1) return bad("sliding_window must be >= 1");
  if (llama3_rope && architecture != "llama") return bad("llama3_rope is for the llama architecture");
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
  return absl::OkStatus();
}

absl::Status BuildTinyModel(const TinyModelOptions& o, model::GgufWriter& w) {
  RETURN_IF_ERROR(o.Validate());
  TinyVocabulary vocab = MakeTinyVocabulary();
  for (int64_t i = static_cast<int64_t>(vocab.tokens.size()); i < o.vocab_size; ++i) {
    vocab.tokens.push_back(absl::StrCat("<|unused_", i, "|>"));
    vocab.token_types.push_back(5);  // unused
  }
  const int64_t n_vocab = static_cast<int64_t>(vocab.tokens.size());
  const int64_t head_dim = o.hidden_size / o.num_heads;
  const std::string& arch = o.architecture;
  const std::string k = arch + ".";
  const bool gemma = arch == "gemma3";
  w.SetString("general.architecture", arch);
  w.SetString("general.name", absl::StrCat("kvfleet tiny ", arch == "llama" ? "" : arch + " ", DTypeName(o.dtype),
                                           " seed ", o.seed));
  w.SetUint32(k + "context_length", static_cast<uint32_t>(o.context_length));
  w.SetUint32(k + "embedding_length", static_cast<uint32_t>(o.hidden_size));
  w.SetUint32(k + "feed_forward_length", static_cast<uint32_t>(o.ffn_size));
  w.SetUint32(k + "block_count", static_cast<uint32_t>(o.num_layers));
  w.SetUint32(k + "attention.head_count", static_cast<uint32_t>(o.num_heads));
  w.SetUint32(k + "attention.head_count_kv", static_cast<uint32_t>(o.num_kv_heads));
  w.SetUint32(k + "rope.dimension_count", static_cast<uint32_t>(head_dim));
  // Gemma's global layers rotate with their own base, beside the local 10,000.
  w.SetFloat32(k + "rope.freq_base", gemma ? 1e6f : o.rope_theta);
  w.SetFloat32(k + "attention.layer_norm_rms_epsilon", gemma ? 1e-6f : 1e-5f);
  w.SetUint32(k + "vocab_size", static_cast<uint32_t>(n_vocab));
  if (arch == "qwen3" || gemma) w.SetUint32(k + "attention.key_length", static_cast<uint32_t>(head_dim));
  if (gemma) w.SetUint32(k + "attention.sliding_window", static_cast<uint32_t>(o.sliding_window));
  AddTinyVocabulary(vocab, w);

  Random rng(o.seed);
  AddMatrix(w, rng, "token_embd.weight", n_vocab, o.hidden_size, o.dtype);
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    AddNorm(w, rng, p + "attn_norm.weight", o.hidden_size);
    AddMatrix(w, rng, p + "attn_q.weight", o.num_heads * head_dim, o.hidden_size, o.dtype);
    AddMatrix(w, rng, p + "attn_k.weight", o.num_kv_heads * head_dim, o.hidden_size, o.dtype);
    AddMatrix(w, rng, p + "attn_v.weight", o.num_kv_heads * head_dim, o.hidden_size, o.dtype);
    AddMatrix(w, rng, p + "attn_output.weight", o.hidden_size, o.num_heads * head_dim, o.dtype);
    AddNorm(w, rng, p + "ffn_norm.weight", o.hidden_size);
    AddMatrix(w, rng, p + "ffn_gate.weight", o.ffn_size, o.hidden_size, o.dtype);
    AddMatrix(w, rng, p + "ffn_up.weight", o.ffn_size, o.hidden_size, o.dtype);
    AddMatrix(w, rng, p + "ffn_down.weight", o.hidden_size, o.ffn_size, o.dtype);
    // What the other architectures add (after Llama's draws, which stay as they were).
    if (arch == "qwen2") {
      AddBias(w, rng, p + "attn_q.bias", o.num_heads * head_dim);
      AddBias(w, rng, p + "attn_k.bias", o.num_kv_heads * head_dim);
      AddBias(w, rng, p + "attn_v.bias", o.num_kv_heads * head_dim);
    }
    if (arch == "qwen3" || gemma) {
      AddNorm(w, rng, p + "attn_q_norm.weight", head_dim);
      AddNorm(w, rng, p + "attn_k_norm.weight", head_dim);
    }
    if (gemma) {
      AddNorm(w, rng, p + "post_attention_norm.weight", o.hidden_size);
      AddNorm(w, rng, p + "post_ffw_norm.weight", o.hidden_size);
    }
  }
  AddNorm(w, rng, "output_norm.weight", o.hidden_size);
  if (!o.tied_embeddings) AddMatrix(w, rng, "output.weight", n_vocab, o.hidden_size, o.dtype);
  if (o.llama3_rope) {
    const std::vector<float> factors =
        model::Llama3FrequencyFactors(o.rope_theta, head_dim, 8.0, 1.0, 4.0, static_cast<double>(o.context_length) / 4);
    w.AddTensor("rope_freqs.weight", {head_dim / 2}, DType::kF32, Encode(DType::kF32, factors));
  }
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
