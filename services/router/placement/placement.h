// The router's placement policy: which live worker gets a request. Transport
// free (no gRPC, no proto): the router's gRPC layer asks the cachemanager
// for overlaps, turns each WorkerOverlap into a WorkerCandidate, calls
// Choose and sends the request to Decision::endpoint. See README.md in this
// folder for the cost model, the options and their defaults, the decision
// memory, the affinity guard and the complexity.
//
// Policies (PlacementOptions::policy, or PlacementRequest::policy per call):
// - prefix_aware: the lowest cost (cost_model.h); ties by load, then used
//   blocks, then worker id. Workers that cannot fit the request's new blocks
//   are considered only if none can. The router's own recent decisions count
//   as held prefix blocks, and the affinity guard keeps a hot prefix from
//   piling requests on one worker.
// - least_loaded: the fewest requests (running + waiting + in flight), ties
//   by used blocks, then worker id.
// - round_robin: the next candidate in worker-id order.
// Draining workers and those in `exclude` (already tried for this request)
// are never chosen. Every decision is recorded in the memory, whatever the
// policy, so switching policies keeps it warm.
//
// Thread-safety: Choose and Forget may be called from any thread; the memory
// and the round-robin counter are behind one mutex, held for O(candidates +
// prompt blocks) work per call.
//
//   Placement placement(options);  // CHECK-fails unless options.Validate() is OK
//   ASSIGN_OR_RETURN(Decision d, placement.Choose(request, candidates, /*exclude=*/{}));
//   // send to d.endpoint; on failure before the first token: exclude d.worker_id and Choose again
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/router/placement/decision.h"
#include "services/router/placement/decision_memory.h"
#include "services/router/placement/placement_input.h"
#include "services/router/placement/placement_options.h"

namespace kvfleet::router {

class Placement {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // `now` is injectable so tests drive the memory's expiry with a fake clock.
  explicit Placement(PlacementOptions options, NowFn now = &Clock::now);

  // INVALID_ARGUMENT for a malformed request (block_size < 1, negative
  // prompt_tokens, more hashes than full blocks) or candidate list (empty or
  // repeated worker ids); UNAVAILABLE when no candidate may be chosen (none,
  // or all draining or excluded), with the counts in the message.
  absl::StatusOr<Decision> Choose(const PlacementRequest& request, std::vector<WorkerCandidate> candidates,
                                  const absl::flat_hash_set<std::string>& exclude = {});

  // The request `decision` placed has ended (finished, failed or
  // cancelled): it stops counting as in-flight load on its worker. Its
  // prefix stays remembered.
  void Settle(const Decision& decision);

  // The attempt `decision` placed was refused or failed before computing
  // anything (`block_hashes`: its request's): forget the prefix it recorded
  // at once, and settle it.
  void Retract(const Decision& decision, std::span<const BlockHash> block_hashes);

  // A worker left the cluster: drop what the router remembers sending it.
  void Forget(const std::string& worker_id);

  // Sent with each decision's ticket (PlacementOptions::router_instance, or random).
  uint64_t router_instance() const { return router_instance_; }

  // Gauges: (hash, worker) pairs remembered; decisions still counted in flight.
  int64_t remembered_blocks() const;
  int64_t in_flight() const;

  const PlacementOptions& options() const { return options_; }

 private:
  // Indexes into `scores` (sorted by worker id, non-empty).
  size_t ChoosePrefixAware(const PlacementRequest& request, std::vector<CandidateScore>& scores, Reason& reason,
                           size_t rotation, std::optional<size_t> source) const;
  // Sets over_guard on the candidates `in_tier` admits (README.md, "Affinity guard").
  template <typename Pred>
  void MarkOverGuard(std::vector<CandidateScore>& scores, Pred in_tier) const;
  // The session's home among the candidates `in_tier` admits: the highest rendezvous weight.
  template <typename Pred>
  static size_t SessionHome(const std::string& session_id, const std::vector<CandidateScore>& scores, Pred in_tier);
  static size_t ChooseLeastLoaded(const std::vector<CandidateScore>& scores, size_t rotation);

  // How long to remember the chosen worker holds the prompt (PlacementOptions::decision_memory).
  Clock::duration PrefixMemoryFor(const PlacementRequest& request, const WorkerCandidate& chosen,
                                  const CandidateScore& score) const;

  const PlacementOptions options_;
  const NowFn now_;
  const uint64_t router_instance_;
  mutable absl::Mutex mu_;
  DecisionMemory memory_ ABSL_GUARDED_BY(mu_);
  uint64_t round_robin_next_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tie_rotation_ ABSL_GUARDED_BY(mu_) = 0;  // exact ties go round, not to the lowest id
};

}  // namespace kvfleet::router
