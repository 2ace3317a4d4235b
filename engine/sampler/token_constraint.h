// A request's constraint on which tokens may come next (a grammar: JSON
// schema, regex, choice, a tool call's shape), as the engine sees it. The
// engine masks each logits row before sampling and reports each sampled
// token, in order: the constraint's state always follows the request's
// output, so batching, chunking, preemption (which recomputes KV, never
// tokens) and speculation (a draft token counts only once sampled from
// its masked row) leave the output what it would be alone. A request
// resumed after a failover replays its earlier output through Accept.
//
// Thread-safety: one per request, used by the engine thread only.
#pragma once

#include <span>

#include "model/token_id.h"

namespace kvfleet::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token the constraint forbids next to -inf.
  virtual void MaskLogits(std::span<float> logits) = 0;
  // Advances past `token`; false when the constraint forbids it.
  virtual bool Accept(model::TokenId token) = 0;
};

}  // namespace kvfleet::engine
