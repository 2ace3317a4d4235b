#include "model/llama_hparams.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::model {
namespace {

absl::StatusOr<int64_t> PositiveInt(const GgufFile& f, const std::string& key) {
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": metadata '", key, "' = ", v, " is out of range"));
  }
  return v;
}

absl::Status Invalid(const GgufFile& f, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(f.path(), ": ", what));
}

}  // namespace

absl::StatusOr<LlamaHparams> ReadLlamaHparams(const GgufFile& f) {
  LlamaHparams hp;
  ASSIGN_OR_RETURN(hp.architecture, f.GetString("general.architecture"));
  if (hp.architecture != "llama" && hp.architecture != "qwen2") {
    return absl::UnimplementedError(absl::StrCat(
        f.path(), ": architecture '", hp.architecture,
        "' (metadata 'general.architecture') is not supported; supported: llama (Llama 2/3, SmolLM2, Mistral), qwen2"));
  }
  const std::string a = hp.architecture + ".";
  if (f.Has("general.name")) {
    ASSIGN_OR_RETURN(hp.name, f.GetString("general.name"));
  }
  ASSIGN_OR_RETURN(hp.context_length, PositiveInt(f, a + "context_length"));
  // Per-thread attention scratch is sized by the context at start.
  constexpr int64_t kMaxContext = int64_t{1} << 24;
  if (hp.context_length > kMaxContext) {
    return Invalid(f, absl::StrCat("context_length ", hp.context_length, " is over kvfleet's limit of ", kMaxContext,
                                   " tokens"));
  }
  ASSIGN_OR_RETURN(hp.hidden_size, PositiveInt(f, a + "embedding_length"));
  ASSIGN_OR_RETURN(hp.ffn_size, PositiveInt(f, a + "feed_forward_length"));
  ASSIGN_OR_RETURN(hp.num_layers, PositiveInt(f, a + "block_count"));
  // Checked against the file before anything is sized by it: a forged
  // block_count must not make the loader reserve gigabytes (found by
  // tests/fuzz/gguf_fuzz.cc; its input is in the corpus).
  constexpr int64_t kTensorsPerLayer = 9;  // 2 norms, 4 attention and 3 feed-forward matrices
  if (hp.num_layers > static_cast<int64_t>(f.tensors().size()) / kTensorsPerLayer) {
    return Invalid(f, absl::StrCat("block_count ", hp.num_layers, " needs at least ", kTensorsPerLayer,
                                   " tensors per layer, but the file has ", f.tensors().size(), " tensors"));
  }
  ASSIGN_OR_RETURN(hp.num_heads, PositiveInt(f, a + "attention.head_count"));
  hp.num_kv_heads = hp.num_heads;
  if (f.Has(a + "attention.head_count_kv")) {
    ASSIGN_OR_RETURN(hp.num_kv_heads, PositiveInt(f, a + "attention.head_count_kv"));
  }
  if (hp.num_heads % hp.num_kv_heads != 0) {
    return Invalid(f, absl::StrCat("attention.head_count ", hp.num_heads,
                                   " is not a multiple of attention.head_count_kv ", hp.num_kv_heads));
  }
  hp.head_dim = hp.hidden_size / hp.num_heads;
  if (f.Has(a + "attention.key_length")) {
    ASSIGN_OR_RETURN(hp.head_dim, PositiveInt(f, a + "attention.key_length"));
  } else if (hp.hidden_size % hp.num_heads != 0) {
    return Invalid(f, absl::StrCat("embedding_length ", hp.hidden_size, " is not a multiple of head_count ",
                                   hp.num_heads));
  }
  if (hp.head_dim % 8 != 0) {
    return Invalid(f, absl::StrCat("head dimension ", hp.head_dim, " is not a multiple of 8"));
  }
  hp.rope_dim = hp.head_dim;
  if (f.Has(a + "rope.dimension_count")) {
    ASSIGN_OR_RETURN(hp.rope_dim, PositiveInt(f, a + "rope.dimension_count"));
    if (hp.rope_dim > hp.head_dim || hp.rope_dim % 2 != 0) {
      return Invalid(f, absl::StrCat("rope.dimension_count ", hp.rope_dim, " must be even and at most ",
                                     hp.head_dim));
    }
  }
  if (f.Has(a + "rope.freq_base")) {
    ASSIGN_OR_RETURN(hp.rope_theta, f.GetFloat(a + "rope.freq_base"));
    if (!(hp.rope_theta > 1.0)) return Invalid(f, "rope.freq_base must be greater than 1");
  }
  if (f.Has(a + "rope.scaling.type")) {
    ASSIGN_OR_RETURN(std::string type, f.GetString(a + "rope.scaling.type"));
    if (type == "linear") {
      hp.rope_scaling = RopeScaling::kLinear;
      ASSIGN_OR_RETURN(hp.rope_scaling_factor, f.GetFloat(a + "rope.scaling.factor"));
      if (!(hp.rope_scaling_factor > 0.0)) return Invalid(f, "rope.scaling.factor must be positive");
    } else if (type != "none") {
      return absl::UnimplementedError(absl::StrCat(f.path(), ": RoPE scaling '", type,
                                                   "' is not supported (supported: none, linear, llama3)"));
    }
  }
  // Llama 3.1+ GGUFs carry their frequency factors as a tensor instead.
  if (f.FindTensor("rope_freqs.weight") != nullptr) hp.rope_scaling = RopeScaling::kLlama3;
  if (f.Has(a + "attention.layer_norm_rms_epsilon")) {
    ASSIGN_OR_RETURN(hp.rms_norm_eps, f.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  }
  hp.rope_pairing = hp.architecture == "qwen2" ? RopePairing::kHalves : RopePairing::kAdjacent;
  hp.qkv_bias = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  hp.tied_embeddings = f.FindTensor("output.weight") == nullptr;

  const TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return Invalid(f, "tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) return Invalid(f, "tensor 'token_embd.weight' is not a matrix");
  hp.vocab_size = embd->shape[1];
  if (f.Has(a + "vocab_size")) {
    ASSIGN_OR_RETURN(int64_t declared, PositiveInt(f, a + "vocab_size"));
    if (declared != hp.vocab_size) {
      return Invalid(f, absl::StrCat("metadata '", a, "vocab_size' = ", declared,
                                     " disagrees with tensor 'token_embd.weight' rows ", hp.vocab_size));
    }
  }
  return hp;
}

}  // namespace kvfleet::model
