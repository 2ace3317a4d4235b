// The engine's side of speculative decoding: which proposer serves which
// request, how long each request's draft is this step, the proposing
// itself, and the bookkeeping of what verification kept.
//
// Before a step is scheduled, Plan() gives every running request that is
// decoding (one pending token) a draft: k from ChooseDraftLengths (the
// request's acceptance, the step's cost curve, the proposer's own cost) or
// the fixed maximum when adaptivity is off; then each proposer drafts for
// its requests in one batched call. The scheduler puts the draft after the
// pending token in the request's chunk; the engine verifies it against the
// target's sampling after the forward pass and reports back through
// RecordVerification().
//
// Thread-safety: engine thread only.
//
//   Speculator spec(options.speculation, options.proposers, kv);
//   spec.Plan(scheduler.running(), budget);   // fills req->draft
//   ... schedule, forward, verify ...
//   spec.RecordVerification(req, drafted, accepted);
#pragma once

#include <chrono>
#include <list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine_stats.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/request/acceptance_estimate.h"
#include "engine/request/request.h"
#include "engine/request/speculation_options.h"
#include "engine/spec/acceptance_by_evidence.h"
#include "engine/spec/proposer.h"
#include "engine/spec/step_cost_model.h"
#include "engine/spec/worth_calibration.h"

namespace kvfleet::engine {

class Speculator {
 public:
  // Proposers must outlive the speculator; names must be unique.
  Speculator(const spec::SpeculationOptions& options, std::vector<spec::Proposer*> proposers, KvCacheManager& kv);

  // The names of the loaded proposers.
  std::vector<std::string> available() const;
  absl::Status Validate(const spec::SpeculationParams& params) const;
  // Sets req.proposer and req.max_draft_tokens from its parameters.
  void Resolve(Request& req) const;

  // Clears last step's drafts and drafts for this one. A proposer's error is
  // logged and costs only its drafts. `token_budget` is the step's.
  void Plan(const std::list<Request*>& running, int32_t token_budget);

  // After verification: `accepted` of `drafted` guesses were kept, the
  // guesses `path` (indices into req.draft, in order).
  void RecordVerification(Request& req, int32_t drafted, int32_t accepted, std::span<const int32_t> path = {});
  // True when the request's drafts may start from the target's hidden
  // state (its proposer's, or any loaded one's for "auto"): the engine then
  // keeps the row that sampled its last token.
  bool NeedsHiddenState(const Request& req) const;
  // A forward step computed `tokens` in `seconds`.
  void ObserveStep(int32_t tokens, double seconds) { step_cost_.Observe(tokens, seconds); }
  // The request finished: proposers drop its state and learn its output.
  void Forget(const Request& req);

  std::vector<SpeculationStats> Stats() const;

 private:
  struct Loaded {
    spec::Proposer* proposer;
    spec::AcceptanceEstimate acceptance;  // across requests: the prior of a new request
    spec::AcceptanceByEvidence by_evidence;  // of drafts whose proposer reported evidence
    spec::WorthCalibration by_worth;         // of guesses whose proposer reported worths
    double seconds_per_token = 0.0;      // the proposer's own cost per drafted token (decayed mean)
    bool measured_cost = false;          // seconds_per_token holds a measurement
    SpeculationStats stats;
  };

  // By name (configuration, requests' choices); null when not loaded.
  const Loaded* Find(std::string_view name) const;
  // The entry of a loaded proposer (a request's, once resolved).
  Loaded& Of(const spec::Proposer* proposer);
  // k per candidate request (adaptive or fixed). A candidate that already
  // holds a draft (from a proposer of cost 0) keeps at most that draft.
  std::vector<int32_t> DraftLengths(const std::vector<Request*>& candidates, const std::list<Request*>& running,
                                    int32_t token_budget);
  // For "auto" requests: drafts with the lookups, keeping a draft found
  // from a match, and points every request still without one at the best
  // other proposer (PickForAuto).
  void PlanAuto(const std::vector<Request*>& candidates);
  // Of the loaded proposers that are not lookups, the one whose measured
  // acceptance buys the most per unit of cost; null when none.
  spec::Proposer* PickForAuto() const;
  // The per-token acceptance a candidate's next draft is expected to have:
  // its evidence level's, when its proposer reported one, else its own.
  double Acceptance(const Request& r);
  // reserve_blocks: free blocks drafting must leave in the pool.
  void Draft(Loaded& loaded, const std::vector<Request*>& requests, const std::vector<int32_t>& lengths,
             int32_t reserve_blocks);

  spec::SpeculationOptions options_;
  std::vector<Loaded> loaded_;
  KvCacheManager& kv_;
  spec::StepCostModel step_cost_;
};

}  // namespace kvfleet::engine
