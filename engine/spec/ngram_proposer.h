// Prompt lookup (n-gram) proposals: the sequence's last n tokens are looked
// up earlier in the same sequence, and the tokens that followed that
// earlier occurrence are proposed. It costs no model at all and pays off
// where output repeats its input: extraction, code edits, summaries quoting
// the source (vLLM's "ngram" method, llama.cpp's prompt lookup).
//
// Rule: for n from max_n down to min_n, take the last n tokens of the
// context and look for an earlier occurrence (one that ends before the
// context's end, so something follows it); propose up to max_tokens of what
// followed. The longest n that matches wins, because a longer match
// predicts better. Among occurrences of the same n-gram, the most recent
// one with max_tokens tokens after it wins, because nearby text is the
// likeliest to be repeating now; when all sit too close to the end (a run
// of one token, a short loop) the earliest wins, having the most to offer.
//
// Cost: O(context × (max_n − min_n + 1) × n) comparisons per call in the
// worst case, with no per-request state; a few thousand tokens take
// microseconds, next to a forward pass of milliseconds.
//
// Thread-safety: immutable after construction; Propose may run anywhere.
//
//   NgramProposer ngram({.min_n = 2, .max_n = 4});
//   ngram.ProposeFor(tokens, 5, &draft);
#pragma once

#include "absl/status/status.h"
#include "engine/spec/proposer.h"

namespace kvfleet::engine::spec {

struct NgramProposerOptions {
  int32_t min_n = 2;  // shorter matches guess too often wrong to pay for a verify pass
  int32_t max_n = 4;

  // INVALID_ARGUMENT unless 1 <= min_n <= max_n <= 64.
  absl::Status Validate() const;
};

class NgramProposer final : public Proposer {
 public:
  // CHECK-fails unless options.Validate() is OK.
  explicit NgramProposer(NgramProposerOptions options);

  std::string_view name() const override { return "ngram"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;

  // The proposal for one context: replaces `*draft` with at most
  // `max_tokens` tokens (none when no n-gram recurs).
  // Returns the n of the match (0: none).
  int32_t ProposeFor(std::span<const model::TokenId> context, int32_t max_tokens,
                     std::vector<model::TokenId>* draft) const;

 private:
  const NgramProposerOptions options_;
};

}  // namespace kvfleet::engine::spec
