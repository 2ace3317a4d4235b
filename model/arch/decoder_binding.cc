#include "model/arch/decoder_binding.h"

#include "absl/strings/str_cat.h"
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

absl::StatusOr<LayerWeights> BindLayer(TensorBinder& b, const ModelConfig& c, int64_t layer,
                                       std::span<const TensorSpec> specs, float norm_offset) {
  const ModelFormat f = b.source().format();
  LayerWeights l;
  for (const TensorSpec& spec : specs) {
    const std::string name = LayerTensor(f, layer, spec);
    const int64_t rows = DimSize(spec.rows, c);
    if (spec.kind != TensorKind::kMatrix) {
      const float offset = spec.kind == TensorKind::kNorm ? norm_offset : 0.0f;
      ASSIGN_OR_RETURN(l.*spec.parts[0].role, b.Vector(name, rows, offset));
      continue;
    }
    ASSIGN_OR_RETURN(WeightView whole, b.Matrix(name, rows, DimSize(spec.cols, c)));
    if (!spec.fused()) {
      l.*spec.parts[0].role = std::move(whole);
      continue;
    }
    // A fused matrix: each part a run of its rows, in order (rows are
    // contiguous, whatever the weight type).
    int64_t first = 0;
    for (const TensorPart& part : spec.parts) {
      if (part.role == nullptr) break;
      const int64_t n = DimSize(part.rows, c);
      WeightView v = whole;
      v.rows = n;
      v.data = static_cast<const uint8_t*>(whole.data) + first * RowBytes(whole.dtype, whole.cols);
      l.*part.role = std::move(v);
      first += n;
    }
    if (first != rows) {
      return absl::InternalError(absl::StrCat(name, ": its parts take ", first, " of its ", rows, " rows"));
    }
  }
  return l;
}

}  // namespace kvfleet::model
