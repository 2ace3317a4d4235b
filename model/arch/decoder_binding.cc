#include "model/arch/decoder_binding.h"

#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<DecoderWeights> BindModelTensors(TensorBinder& b, const ModelConfig& c, float norm_offset) {
  const ModelFormat f = b.source().format();
  DecoderWeights w;
  ASSIGN_OR_RETURN(w.token_embd, b.Matrix(ModelTensor(f, names::kTokenEmbd), c.vocab_size, c.hidden_size));
  ASSIGN_OR_RETURN(w.output_norm, b.Vector(ModelTensor(f, names::kOutputNorm), c.hidden_size, norm_offset));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, b.Matrix(ModelTensor(f, names::kOutput), c.vocab_size, c.hidden_size));
  }
  w.layers.reserve(static_cast<size_t>(c.num_layers));
  return w;
}

absl::StatusOr<LayerWeights> BindLlamaFamilyLayer(TensorBinder& b, const ModelConfig& c, int64_t i,
                                                  const LayerCoreNames& n) {
  const ModelFormat f = b.source().format();
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  LayerWeights l;
  ASSIGN_OR_RETURN(l.attn_norm, b.Vector(LayerTensor(f, i, names::kAttnNorm), c.hidden_size, n.norm_offset));
  ASSIGN_OR_RETURN(l.attn_q, b.Matrix(LayerTensor(f, i, names::kAttnQ), q_dim, c.hidden_size));
  ASSIGN_OR_RETURN(l.attn_k, b.Matrix(LayerTensor(f, i, names::kAttnK), kv_dim, c.hidden_size));
  ASSIGN_OR_RETURN(l.attn_v, b.Matrix(LayerTensor(f, i, names::kAttnV), kv_dim, c.hidden_size));
  ASSIGN_OR_RETURN(l.attn_output, b.Matrix(LayerTensor(f, i, names::kAttnOutput), c.hidden_size, q_dim));
  ASSIGN_OR_RETURN(l.ffn_norm, b.Vector(LayerTensor(f, i, n.ffn_norm), c.hidden_size, n.norm_offset));
  ASSIGN_OR_RETURN(l.ffn_gate, b.Matrix(LayerTensor(f, i, names::kFfnGate), c.ffn_size, c.hidden_size));
  ASSIGN_OR_RETURN(l.ffn_up, b.Matrix(LayerTensor(f, i, names::kFfnUp), c.ffn_size, c.hidden_size));
  ASSIGN_OR_RETURN(l.ffn_down, b.Matrix(LayerTensor(f, i, names::kFfnDown), c.hidden_size, c.ffn_size));
  return l;
}

}  // namespace kvfleet::model
