// Finds the architecture of a model source: by GGUF general.architecture or
// by config.json's architectures[0], among all_architectures.h's list.
//
//   ASSIGN_OR_RETURN(const Architecture* arch, FindArchitecture(source));
//   ASSIGN_OR_RETURN(ModelConfig config, arch->read_config(source));
//   ASSIGN_OR_RETURN(DecoderWeights weights, BindWeights(*arch, binder, config));
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/arch/decoder_config.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/tensor_binder.h"
#include "model/arch/tensor_spec.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

struct Architecture {
  std::string_view name;  // "llama", "qwen2", ...: ModelConfig::architecture
  std::span<const std::string_view> gguf_names;
  std::span<const std::string_view> hf_names;
  absl::StatusOr<ModelConfig> (*read_config)(const ModelSource&);
  // Its layer tensors (after "blk.N." / "model.layers.N."): names in both
  // formats, kinds, shape rules and roles; the Llama core first.
  std::span<const TensorSpec> layer_tensors;
  // ReadConfig's inverse in either format's keys, and its config at a
  // shape with its own defaults.
  void (*write_config)(const ModelConfig&, ModelFormat, ConfigWriter&);
  absl::StatusOr<ModelConfig> (*default_config)(const DecoderShape&);
  std::string_view hf_model_type;  // config.json's model_type
  // What differs between its formats' weights: GGUF's RoPE pairing (Wq and
  // Wk rows permuted for adjacent pairs); a constant checkpoints leave out
  // of every norm weight.
  RopePairing gguf_rope_pairing = RopePairing::kHalves;
  float hf_norm_offset = 0.0f;
  // GGUF tensors that hold config rather than weights (Llama 3's
  // rope_freqs, Phi-3's LongRoPE factors): kConfigTensors where the
  // architecture declares it, else names::kDecoderConfigTensors.
  std::span<const TensorSpec> config_tensors;
};

std::span<const Architecture> Architectures();

// Unimplemented naming the source's architecture and listing the supported ones.
absl::StatusOr<const Architecture*> FindArchitecture(const ModelSource& source);
// By registry name ("qwen2"); null when there is none.
const Architecture* FindArchitectureByName(std::string_view name);

// The config the source's architecture reads from it, validated.
absl::StatusOr<ModelConfig> ReadModelConfig(const ModelSource& source);

// Every tensor of `arch` bound by its specs (decoder_binding.h), the
// format's norm offset added to its norms.
absl::StatusOr<DecoderWeights> BindWeights(const Architecture& arch, TensorBinder& binder, const ModelConfig& config);

// "llama (GGUF llama; Hugging Face LlamaForCausalLM, MistralForCausalLM), qwen2 (...)"
std::string SupportedArchitectures();

}  // namespace kvfleet::model
