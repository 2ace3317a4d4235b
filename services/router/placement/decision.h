// What the placement policy decided and why. Reason is a small closed set so
// that it can label a metric (routing decisions by reason); the per-candidate
// scores are there for debug logs and tests.
//
//   ASSIGN_OR_RETURN(Decision d, placement.Choose(request, candidates));
//   decisions_counter.Add({{"reason", std::string(ReasonName(d.reason))}}).Increment();
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvfleet::router {

enum class Reason {
  kPrefixHit,       // prefix_aware: the cheapest worker holds part of the prompt (per the cachemanager)
  kRecentDecision,  // prefix_aware: ... per the router's own recent decisions, ahead of the worker's events
  kCold,            // prefix_aware: the cheapest worker holds none of it (no one did, or load outweighed the hit)
  kAffinityGuard,   // prefix_aware: the cheapest worker was overloaded; the cheapest of the others instead
  kSession,         // prefix_aware: the session's home worker (it held as much of the prompt as any)
  kLeastLoaded,     // least_loaded policy
  kRoundRobin,      // round_robin policy
  kPeerPull,        // prefix_aware: the cheapest worker pulls part of the prompt's KV from a peer that holds more
};

// "prefix_hit", "recent_decision", "cold", "affinity_guard", "session", "least_loaded", "round_robin",
// "peer_pull".
std::string_view ReasonName(Reason reason);

// One candidate as the cost model saw it (README.md, "Cost model").
struct CandidateScore {
  std::string worker_id;
  int32_t reported_blocks = 0;           // matched blocks per the cachemanager
  int32_t remembered_blocks = 0;         // matched blocks per the router's recent decisions
  int32_t matched_blocks = 0;            // the larger of the two
  int32_t new_blocks = 0;                // KV blocks the request would add on this worker
  double uncached_prefill_blocks = 0.0;  // lower-tier hits included, at their load cost
  double lower_tier_blocks = 0.0;        // of those, what the matched blocks below the device cost
  double lora_load_blocks = 0.0;         // of those, loading the request's LoRA adapter into a slot
  int32_t peer_blocks = 0;               // blocks it would pull from the peer source (0: none)
  double pull_blocks = 0.0;              // of uncached_prefill_blocks, what pulling them costs
  bool pull_priced_out = false;          // the source held more, but pulling was priced no faster than computing
  double decode_load_blocks = 0.0;
  double kv_penalty = 0.0;
  double cost = 0.0;
  double cost_computing = 0.0;  // the cost had it computed what it would pull (= cost without a pull)
  int32_t load = 0;             // running + waiting + in-flight requests
  int64_t used_blocks = 0;      // blocks_used + in-flight blocks
  bool fits = true;             // its free blocks can hold the request's new blocks
  bool saturated = false;       // load >= max_num_seqs (when known): the request would queue
  bool over_guard = false;      // prefix_aware: the affinity guard rules it out
};

// Where the chosen worker pulls the prompt's leading blocks from.
struct PeerPull {
  std::string worker_id;  // the source
  std::string endpoint;   // its KV transfer address
  int32_t blocks = 0;     // leading blocks of the prompt it holds
};

struct Decision {
  std::string worker_id;
  std::string endpoint;
  Reason reason = Reason::kCold;
  int32_t matched_blocks = 0;       // the chosen worker's, reported or remembered
  double prefix_match_ratio = 0.0;  // matched tokens / prompt tokens, in [0, 1]
  // False when no candidate could hold the request's new blocks: it was
  // placed anyway (the worker queues or preempts) rather than refused.
  bool fits = true;
  // Set when the chosen worker pulls from a peer; pull_declined when a peer
  // held more of the prompt than the chosen worker but the price said
  // computing it is no slower.
  std::optional<PeerPull> peer_pull;
  bool pull_declined = false;
  std::vector<CandidateScore> scores;  // every candidate considered, by worker id
  // The decision's ticket: sent to the worker with the router's instance id
  // (its load reports then say which decisions they include), and for
  // Placement::Settle and Retract.
  uint64_t in_flight_ticket = 0;
  uint64_t router_instance = 0;
};

}  // namespace kvfleet::router
