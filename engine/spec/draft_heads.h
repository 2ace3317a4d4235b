// Draft heads (Medusa-1 on a frozen target): K small residual blocks on
// the target's own last hidden state (after its final norm, the output
// head's input), head i guessing the token i + 2 places ahead of that state
// (the target's own head gives the next one):
//
//   h_i = h + SiLU(W_i · h + b_i),   guess_i = argmax over the draft vocabulary of E · h_i
//
// E is the target's output head restricted to the draft vocabulary (the
// tokens the heads were trained to predict): shared with the target, not
// stored, so the file holds only K × (hidden² + hidden) values.
//
// On disk (tools/heads/ writes it; `kvfleet dump-hidden` supplies the
// features): a directory with
//   config.json         {"format": "kvfleet-draft-heads-v1", "target_fingerprint": hex,
//                        "hidden_size": H, "num_heads": K, "vocab_ids": [...], "training": {...}}
//   heads.safetensors   head.<i>.weight [H, H] and head.<i>.bias [H], float16 or float32
// The fingerprint (model/model_fingerprint.h) names the exact weights the
// heads were trained on; heads for any other model are refused.
//
// Thread-safety: immutable after Load; Guess may run anywhere.
//
//   ASSIGN_OR_RETURN(DraftHeads heads, DraftHeads::Load("heads/smollm2", target_model, "model.gguf", fingerprint));
//   auto top = heads.Candidates(hidden, 3, /*top_k=*/2);   // for a tree of guesses
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/spec/draft_tree.h"
#include "model/model.h"
#include "model/token_id.h"

namespace kvfleet::engine::spec {

class DraftHeads {
 public:
  // INVALID_ARGUMENT naming the directory for a malformed file, heads of
  // another hidden size, or heads trained for another model than the one
  // of `target_fingerprint` (model/model_fingerprint.h: the caller's, so
  // that it may come from the cache; both fingerprints and the target's
  // path are named).
  static absl::StatusOr<DraftHeads> Load(const std::string& dir, const model::Model& target,
                                         std::string_view target_path, std::string_view target_fingerprint);

  int32_t num_heads() const { return static_cast<int32_t>(weights_.size()); }
  int64_t hidden_size() const { return hidden_; }
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_ids_.size()); }
  // Bytes read per guess round: the heads and the draft vocabulary's rows.
  int64_t bytes() const;

  // For heads 0 .. count − 1 (at most num_heads()), each head's `top_k`
  // most likely tokens, most likely first, with their probabilities
  // (softmax over the draft vocabulary); none for a head none of whose
  // logits is finite.
  std::vector<std::vector<TreeCandidate>> Candidates(std::span<const float> hidden, int32_t count, int32_t top_k) const;

 private:
  int64_t hidden_ = 0;
  std::vector<std::vector<float>> weights_;  // per head, [H, H] row-major
  std::vector<std::vector<float>> biases_;   // per head, [H]
  std::vector<model::TokenId> vocab_ids_;
  std::vector<float> head_rows_;  // [vocab, H]: the target's output head rows of vocab_ids_
};

}  // namespace kvfleet::engine::spec
