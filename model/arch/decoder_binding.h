// Binding a decoder's tensors by their specs (tensor_spec.h), in the
// source's format: the whole-model tensors, and each layer's from the
// architecture's list. Matrices are checked against their shape rule; a
// fused matrix becomes one view per part, each a run of its rows; norms get
// the format's norm offset (Gemma's checkpoints store w for 1 + w).
//
//   ASSIGN_OR_RETURN(DecoderWeights w, BindModelTensors(binder, config));
//   ASSIGN_OR_RETURN(LayerWeights l, BindLayer(binder, config, 0, names::kLlamaLayer, 0.0f));
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/tensor_binder.h"
#include "model/arch/tensor_spec.h"

namespace kvfleet::model {

// token_embd, output_norm and output (the embedding table when tied); no layers yet.
absl::StatusOr<DecoderWeights> BindModelTensors(TensorBinder& b, const ModelConfig& c, float norm_offset = 0.0f);

// Layer `layer`'s tensors of `specs`, each into its roles.
absl::StatusOr<LayerWeights> BindLayer(TensorBinder& b, const ModelConfig& c, int64_t layer,
                                       std::span<const TensorSpec> specs, float norm_offset);

}  // namespace kvfleet::model
