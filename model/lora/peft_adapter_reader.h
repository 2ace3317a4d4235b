// Reads a LoRA adapter in Hugging Face PEFT's format, a directory with
// adapter_config.json and adapter_model.safetensors, for a base model, and
// refuses what kvfleet cannot serve exactly, naming the field or tensor and
// what to do: another PEFT type, DoRA, modules_to_save, bias terms,
// per-module rank or alpha patterns, embedding or head targets, target
// modules that match no projection of the base, a rank over the limit
// (--max-lora-rank), tensors whose shapes do not fit the base, an A without
// its B, and a config that names another base model's fingerprint
// (kvfleet_base_fingerprint, which kvfleet's tools write).
//
// Thread-safety: a pure function of its inputs.
//
//   ASSIGN_OR_RETURN(LoraAdapter a, ReadPeftAdapter("adapters/sql", "sql", *base, {.max_rank = 16}));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/lora/lora_adapter.h"
#include "model/model.h"

namespace kvfleet::model {

struct LoraLimits {
  int32_t max_rank = 16;  // --max-lora-rank
  // The base's fingerprint (model_fingerprint.h); empty: not checked.
  std::string base_fingerprint;
};

absl::StatusOr<LoraAdapter> ReadPeftAdapter(const std::string& dir, const std::string& name, const Model& base,
                                            const LoraLimits& limits);
// The same from adapter_config.json's text and the weights file's path;
// `origin` names the adapter in messages (the fuzzer's entry).
absl::StatusOr<LoraAdapter> ParsePeftAdapter(std::string_view config_json, const std::string& weights_path,
                                             const std::string& origin, const std::string& name, const Model& base,
                                             const LoraLimits& limits);

}  // namespace kvfleet::model
