// A request's constraint on which tokens may come next (a grammar: JSON
// schema, regex, choice, a tool call's shape), as the engine sees it. The
// engine masks each logits row before sampling and reports each sampled
// token, in order: the constraint's state always follows the request's
// output, so batching, chunking, preemption (which recomputes KV, never
// tokens) and speculation (a draft token counts only once sampled from
// its masked row) leave the output what it would be alone. A request
// resumed after a failover replays its earlier output through Accept.
//
// The mask for the next token depends only on the tokens accepted so far,
// so the engine computes it (PrepareMask) on another thread while the
// forward pass that produces the logits runs; MaskLogits then only applies
// it. A constraint whose state moved since (a verified draft token) computes
// the mask again itself.
//
// Thread-safety: one per request. PrepareMask may run on another thread,
// but never at the same time as another call on the same constraint.
#pragma once

#include <span>

#include "model/token_id.h"

namespace kvfleet::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Computes the mask for the token after those accepted so far.
  virtual void PrepareMask() {}
  // Sets the logit of every token the constraint forbids next to -inf.
  virtual void MaskLogits(std::span<float> logits) = 0;
  // Advances past `token`; false when the constraint forbids it.
  virtual bool Accept(model::TokenId token) = 0;
};

}  // namespace kvfleet::engine
