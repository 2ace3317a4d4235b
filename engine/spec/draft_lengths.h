// How many tokens each request drafts this step: the adaptive part of
// speculative decoding.
//
// A step computing N tokens takes about fixed + per_token × N seconds
// (StepCostModel) and yields P tokens. Drafting one more token for a
// request costs per_token (verification) plus what the proposer spends per
// drafted token, and yields r^j more tokens on average, where r is that
// request's acceptance rate and j the token's place in its draft. The
// candidates are taken best first while each raises the step's tokens per
// second, (P + r^j) / (T + cost) > P / T (the first guess also pays any
// setup, such as a draft model catching up). So at batch 1, where the fixed part
// dominates, long drafts pay even at modest acceptance; in a large batch the
// step is already arithmetic-bound, the bar nears 1 and speculation turns
// itself off; and a request whose drafts keep failing stops drafting.
//
//   std::vector<int32_t> k = ChooseDraftLengths(candidates, cost, {.tokens = 3, .produced = 3});
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/step_cost_model.h"

namespace kvfleet::engine::spec {

struct DraftCandidate {
  double acceptance = 0.0;             // per-token rate r in [0, 1]
  int32_t max_tokens = 0;              // the most this request may draft now
  double propose_seconds_per_token = 0.0;  // the proposer's own cost per drafted token
  double setup_seconds = 0.0;  // charged to the first drafted token (a draft model's catch-up, amortized)
  // When set: the j-th guess is worth worths[j] (the proposer's estimate
  // that it is kept, e.g. a tree's node) instead of acceptance^(j+1).
  std::span<const double> worths;
};

// The step before any draft.
struct PlainStep {
  int32_t tokens = 0;     // computed (decode tokens and prefill chunks)
  double produced = 0.0;  // tokens it yields (one per decoding request)
};

std::vector<int32_t> ChooseDraftLengths(std::span<const DraftCandidate> candidates, const StepCostModel& cost,
                                        const PlainStep& plain);

}  // namespace kvfleet::engine::spec
