// Writes a LoRA adapter in Hugging Face PEFT's format (what
// peft_adapter_reader.h reads and PEFT itself loads): adapter_config.json
// with the rank, alpha, rsLoRA and the target modules it changes, and
// adapter_model.safetensors with every pair in float32 under PEFT's names
// (base_model.model.model.layers.<l>.self_attn.q_proj.lora_A.weight, ...).
// With a base fingerprint, the weights file's safetensors metadata records it
// (kvfleet_base_fingerprint; PEFT itself refuses unknown config keys, and
// ignores metadata) and a reader given another base refuses the adapter.
//
//   RETURN_IF_ERROR(WritePeftAdapter(adapter, "adapters/sql", model->fingerprint()));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "model/arch/model_config.h"
#include "model/lora/lora_adapter.h"

namespace kvfleet::model {

// Creates `dir` when missing; overwrites the two files. `base` (may be
// null: the pairs are written as held) is the model the adapter's pairs
// are laid out for: a GGUF Llama's q and k rows go back to the
// checkpoint's order, as PEFT holds them (lora_adapter.h).
absl::Status WritePeftAdapter(const LoraAdapter& adapter, const std::string& dir,
                              std::string_view base_fingerprint = {}, const ModelConfig* base = nullptr);

}  // namespace kvfleet::model
