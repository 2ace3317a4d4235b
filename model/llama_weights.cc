#include "model/llama_weights.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kvfleet::model {
namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& f) : f_(f) {}

  // A 2-D weight of shape [rows, cols] (GGUF [cols, rows]).
  absl::StatusOr<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
    if (t->shape.size() != 2 || t->shape[0] != cols || t->shape[1] != rows) {
      return WrongShape(*t, absl::StrCat("[", cols, ", ", rows, "]"));
    }
    if (cols % 32 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor '", name, "': row length ", cols,
                                                     " is not a multiple of 32"));
    }
    return WeightView{name, t->dtype, rows, cols, t->data};
  }

  // A float32 vector of n values (norm weights, biases, RoPE factors).
  absl::StatusOr<WeightView> Vector(const std::string& name, int64_t n) {
    ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
    if (t->shape.size() != 1 || t->shape[0] != n) return WrongShape(*t, absl::StrCat("[", n, "]"));
    if (t->dtype != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor '", name, "' has type ",
                                                     DTypeName(t->dtype), "; norm weights and biases must be F32"));
    }
    return WeightView{name, t->dtype, 1, n, t->data};
  }

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

 private:
  absl::StatusOr<const TensorInfo*> Find(const std::string& name) {
    const TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor '", name, "' is missing"));
    }
    return t;
  }

  absl::Status WrongShape(const TensorInfo& t, const std::string& expected) {
    return absl::InvalidArgumentError(absl::StrCat(f_.path(), ": tensor '", t.name, "' has shape [",
                                                   absl::StrJoin(t.shape, ", "), "], expected ", expected));
  }

  const GgufFile& f_;
};

absl::StatusOr<LlamaLayerWeights> BindLayer(Binder& b, const LlamaHparams& hp, int64_t i) {
  const std::string p = absl::StrCat("blk.", i, ".");
  const int64_t q_dim = hp.num_heads * hp.head_dim;
  const int64_t kv_dim = hp.num_kv_heads * hp.head_dim;
  LlamaLayerWeights l;
  ASSIGN_OR_RETURN(l.attn_norm, b.Vector(p + "attn_norm.weight", hp.hidden_size));
  ASSIGN_OR_RETURN(l.attn_q, b.Matrix(p + "attn_q.weight", q_dim, hp.hidden_size));
  ASSIGN_OR_RETURN(l.attn_k, b.Matrix(p + "attn_k.weight", kv_dim, hp.hidden_size));
  ASSIGN_OR_RETURN(l.attn_v, b.Matrix(p + "attn_v.weight", kv_dim, hp.hidden_size));
  if (hp.qkv_bias) {
    ASSIGN_OR_RETURN(l.attn_q_bias, b.Vector(p + "attn_q.bias", q_dim));
    ASSIGN_OR_RETURN(l.attn_k_bias, b.Vector(p + "attn_k.bias", kv_dim));
    ASSIGN_OR_RETURN(l.attn_v_bias, b.Vector(p + "attn_v.bias", kv_dim));
  }
  ASSIGN_OR_RETURN(l.attn_output, b.Matrix(p + "attn_output.weight", hp.hidden_size, q_dim));
  ASSIGN_OR_RETURN(l.ffn_norm, b.Vector(p + "ffn_norm.weight", hp.hidden_size));
  ASSIGN_OR_RETURN(l.ffn_gate, b.Matrix(p + "ffn_gate.weight", hp.ffn_size, hp.hidden_size));
  ASSIGN_OR_RETURN(l.ffn_up, b.Matrix(p + "ffn_up.weight", hp.ffn_size, hp.hidden_size));
  ASSIGN_OR_RETURN(l.ffn_down, b.Matrix(p + "ffn_down.weight", hp.hidden_size, hp.ffn_size));
  return l;
}

}  // namespace

absl::StatusOr<LlamaWeights> BindLlamaWeights(const GgufFile& file, const LlamaHparams& hp) {
  Binder b(file);
  LlamaWeights w;
  ASSIGN_OR_RETURN(w.token_embd, b.Matrix("token_embd.weight", hp.vocab_size, hp.hidden_size));
  ASSIGN_OR_RETURN(w.output_norm, b.Vector("output_norm.weight", hp.hidden_size));
  if (hp.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, b.Matrix("output.weight", hp.vocab_size, hp.hidden_size));
  }
  if (b.Has("rope_freqs.weight")) {
    ASSIGN_OR_RETURN(w.rope_freqs, b.Vector("rope_freqs.weight", hp.rope_dim / 2));
  }
  w.layers.reserve(hp.num_layers);
  for (int64_t i = 0; i < hp.num_layers; ++i) {
    ASSIGN_OR_RETURN(LlamaLayerWeights l, BindLayer(b, hp, i));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace kvfleet::model
