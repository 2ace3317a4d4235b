// Draft heads for a target model, loaded and checked: the weights the
// executor runs (model/arch/draft_heads_forward.h) and the draft
// vocabulary their logits are over.
//
// On disk (tools/heads/ writes it; `kvfleet dump-hidden` supplies the
// features): a directory with
//   config.json         {"format": "kvfleet-draft-heads-v1", "target_fingerprint": hex,
//                        "hidden_size": H, "num_heads": K, "vocab_ids": [...], "training": {...}}
//   heads.safetensors   head.<i>.weight [H, H] and head.<i>.bias [H], float16, bfloat16 or float32
// The fingerprint (model/model_fingerprint.h) names the exact weights the
// heads were trained on; heads for any other model are refused. The
// output head E is the target's, not stored: the file holds only
// K × (H² + H) values.
//
// Thread-safety: immutable after Load.
//
//   ASSIGN_OR_RETURN(auto heads, DraftHeads::Load("heads/smollm2", target, "model.gguf", fingerprint));
//   RETURN_IF_ERROR(executor.LoadDraftHeads(heads->weights()));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/draft_heads_forward.h"
#include "model/model.h"
#include "model/token_id.h"

namespace kvfleet::model {

class DraftHeads {
 public:
  // INVALID_ARGUMENT naming the directory for a malformed file, heads of
  // another hidden size, or heads trained for another model than the one
  // of `target_fingerprint` (the caller's, so that it may come from the
  // cache; both fingerprints and the target's path are named).
  static absl::StatusOr<std::unique_ptr<const DraftHeads>> Load(const std::string& dir, const Model& target,
                                                                std::string_view target_path,
                                                                std::string_view target_fingerprint);

  int32_t num_heads() const { return static_cast<int32_t>(weights_.heads.size()); }
  int64_t hidden_size() const { return weights_.hidden_size(); }
  int64_t vocab_size() const { return weights_.vocab_size(); }
  // The target's token of each draft-vocabulary index.
  std::span<const TokenId> vocab_ids() const { return vocab_ids_; }
  // Host views into this object.
  const DraftHeadWeights& weights() const { return weights_; }

 private:
  DraftHeads() = default;

  std::vector<std::vector<uint8_t>> storage_;  // each head's matrix and bias, the draft rows of E
  std::vector<TokenId> vocab_ids_;
  DraftHeadWeights weights_;
};

}  // namespace kvfleet::model
