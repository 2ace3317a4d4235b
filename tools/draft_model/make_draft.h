// Makes a cheaper draft model for speculative decoding (the `draft`
// proposer, engine/README.md) from a target GGUF: the first
// N transformer blocks, optionally with every weight matrix requantized, and
// everything else of the target unchanged. A draft
// shares the target's vocabulary, embeddings and output head, so its
// proposals are in the target's token space.
//
// What the output holds:
//   - every metadata key of the target, with its own value type, except:
//     `<arch>.block_count` = the layers kept; `general.name` + " draft (N
//     layers[, TYPE])"; `general.file_type` updated when requantizing;
//     arrays under `<arch>.` with one entry per layer cut to the layers kept;
//     `general.alignment` dropped unless 32 (the writer aligns to 32);
//   - the tensors `blk.{i}.*` for i < N and every tensor outside the blocks
//     (token_embd, output_norm, output, rope_freqs, ...), in the target's
//     order;
//   - with a weight type, every 2-D tensor whose rows are whole blocks of it
//     converted to it through float32 (kernels/cpu/quantize.h); 1-D tensors
//     (norms, biases) and anything else are copied as they are.
//
// The target must load with model::Model, and the draft is loaded the
// same way before it replaces `out_path`: it is written to a temporary file
// next to it and renamed, so a failure never leaves a partial file behind.
// Unchanged tensors are streamed from the target's mapping; requantized ones
// are held in memory until the file is written.
//
// Thread-safety: a free function; concurrent calls need distinct out paths.
//
//   MakeDraftOptions o{.keep_layers = 8, .weight_type = DType::kQ4_0};
//   RETURN_IF_ERROR(MakeDraftModel("SmolLM2-135M.Q8_0.gguf", "draft.gguf", o));
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/dtype.h"

namespace kvfleet::tools {

struct MakeDraftOptions {
  int32_t keep_layers = 0;           // the first N blocks; 0: all of them
  std::optional<DType> weight_type;  // requantize 2-D weight matrices (not norms); nullopt: keep

  // keep_layers >= 0. Whether it fits the target is checked against the file.
  absl::Status Validate() const;
};

// INVALID_ARGUMENT for bad options, keep_layers beyond the target's layers or
// out_path naming the target; the target's own load error (NOT_FOUND,
// INVALID_ARGUMENT, UNIMPLEMENTED...) when it cannot be loaded; a write error
// naming out_path.
absl::Status MakeDraftModel(const std::string& target_path, const std::string& out_path, const MakeDraftOptions& opts);

}  // namespace kvfleet::tools
