// Speculative decoding's proposers: something cheap that guesses the next
// few tokens of a sequence, for the target model to check all at once in
// one forward pass (issue 7; DESIGN.md, "speculative decoding"). A proposer
// only guesses: acceptance against the target's distribution decides what
// is kept, so a bad guess costs time, never correctness.
//
// Implementations: NgramProposer (prompt lookup) here; a draft model and
// self-speculation (the target's first layers) come behind the same
// interface.
//
// Thread-safety: a proposer is used by the engine thread only.
//
//   std::vector<model::TokenId> draft;
//   proposer.Propose(request_tokens, /*max_tokens=*/4, &draft);  // may leave it empty
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "model/token_id.h"

namespace kvfleet::engine::spec {

class Proposer {
 public:
  virtual ~Proposer() = default;

  // A label for metrics and logs: "ngram", "draft", "self".
  virtual std::string_view name() const = 0;

  // Replaces `*draft` with at most `max_tokens` guesses for the tokens that
  // follow `context` (the request's prompt and output so far, in order).
  // An empty draft means "no useful guess": the step decodes as usual.
  virtual void Propose(std::span<const model::TokenId> context, int32_t max_tokens,
                       std::vector<model::TokenId>* draft) = 0;
};

}  // namespace kvfleet::engine::spec
