// Writes a Hugging Face checkpoint directory from a GGUF file: config.json,
// the weights as safetensors shards with model.safetensors.index.json (or
// one model.safetensors), tokenizer.json, tokenizer_config.json and
// generation_config.json. The weights are the GGUF's, dequantized exactly
// and stored in the chosen dtype (bf16 rounds them), with what differs
// between the formats undone: the Llama converter's Wq/Wk row permutation
// for adjacent-pair RoPE, Gemma's 1 + w norm weights (model/arch's
// registry says which). Tensor names come from the architecture's own
// tables in both formats.
//
// Used to make a checkpoint of a real model for the tests (the
// checkpoint path on real weights and a real tokenizer) and to write tiny
// checkpoints of every architecture. `kvfleet export-hf` runs it.
//
// Thread-safety: a free function.
//
//   RETURN_IF_ERROR(ExportHfCheckpoint("qwen.gguf", "/tmp/qwen-hf", {.dtype = DType::kBF16, .shards = 2}));
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "nlohmann/json.hpp"

namespace kvfleet::tools {

struct HfExportOptions {
  DType dtype = DType::kBF16;  // F32, F16 or BF16
  int shards = 2;              // >= 1; 1 writes model.safetensors without an index
  bool tokenizer_only = false; // tokenizer.json and tokenizer_config.json alone
  // Merged into config.json last: what a GGUF does not say in the form a
  // checkpoint says it (a Llama 3 file's rope_scaling behind its frequency factors).
  nlohmann::json config_extras = nlohmann::json::object();

  absl::Status Validate() const;
};

absl::Status ExportHfCheckpoint(const std::string& gguf_path, const std::string& out_dir,
                                const HfExportOptions& options);

}  // namespace kvfleet::tools
