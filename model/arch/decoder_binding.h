// Binding steps every decoder architecture shares: the whole-model tensors
// and the Llama family's layer core (two norms, four attention matrices,
// three feed-forward ones), by tensor_names.h's names in the source's
// format. An architecture binds its extras after (biases, head norms,
// Gemma's post-norms).
//
//   ASSIGN_OR_RETURN(DecoderWeights w, BindModelTensors(binder, config));
//   ASSIGN_OR_RETURN(LayerWeights l, BindLlamaFamilyLayer(binder, config, 0, {}));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/tensor_binder.h"
#include "model/arch/tensor_names.h"

namespace kvfleet::model {

// How an architecture's layer core departs from the Llama family's.
struct LayerCoreNames {
  TensorName ffn_norm = names::kFfnNorm;
  float norm_offset = 0.0f;  // added to every norm weight (Gemma's checkpoints store w for 1 + w)
};

// token_embd, output_norm and output (the embedding table when tied); no layers yet.
absl::StatusOr<DecoderWeights> BindModelTensors(TensorBinder& b, const ModelConfig& c, float norm_offset = 0.0f);

absl::StatusOr<LayerWeights> BindLlamaFamilyLayer(TensorBinder& b, const ModelConfig& c, int64_t layer,
                                                  const LayerCoreNames& names);

}  // namespace kvfleet::model
