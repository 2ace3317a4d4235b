// Picks the worker for one attempt of a request: the pool's routable
// workers become placement candidates, enriched with the cachemanager's
// FindOverlaps answer (how many of the prompt's leading blocks each holds,
// and its latest load report), and the placement policy chooses.
//
// When the cachemanager cannot be asked (no address given, its channel is
// failing, or the call errs or takes longer than overlap_timeout) the
// decision is made least_loaded from the pool's own probes, and the
// fallback is counted in a metric; the client never sees it (docs/design.md,
// Placement).
//
// Roles (common/worker_role.h): whole requests and the decode half of a
// split go to workers that decode (role decode or both; every worker when
// none does); a request with no token yet whose uncached prompt is long
// goes to a prefill worker instead, to compute its prompt and first token
// and hand off (split_policy.h); the decode half then pulls from it.
//
// Thread-safety: Choose may be called from many threads at once.
//
//   RouteSelector selector(pool, placement, cachemanager_channel, metrics, {});
//   PromptBlocks blocks{.prompt = prompt, .root = RootBlockHash(model_id, salt)};
//   ASSIGN_OR_RETURN(Route route, selector.Choose(model_id, blocks, /*exclude=*/{}));
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/block_hash.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/router/placement/placement.h"
#include "services/router/placement/split_policy.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

struct RouteSelectorOptions {
  std::chrono::milliseconds overlap_timeout{100};
  SplitOptions split;
};

// A request's prompt and its full-block hashes, computed once per request
// with the block size the workers use (known once any worker answered
// GetInfo, hence lazily).
struct PromptBlocks {
  std::span<const int32_t> prompt;
  BlockHash root;  // RootBlockHash(model id, cache salt)
  int32_t block_size = 0;
  std::vector<BlockHash> hashes;
  std::string session_id;  // GenerationOptions.session_id, for placement

  void HashWith(int32_t pool_block_size);
};

// What one attempt asks of the selector.
struct RouteAsk {
  // Not empty: only workers of this numerics identity (a stream already
  // started continues token for token only on the same).
  std::string numerics;
  // The request has no token yet: its prefill may be split off.
  bool may_split = false;
  // The decode half of a split: the prefill worker to pull the prompt from.
  std::optional<HandoffSource> handoff;
  // A LoRA adapter (empty: the base model): only workers that have it
  // loaded with this digest serve; one where it is not resident in a device
  // slot is charged its measured slot load.
  std::string lora;
  std::string lora_digest;
};

struct Route {
  Decision decision;
  Policy policy;  // the policy applied (least_loaded on a fallback)
  std::shared_ptr<v1::Worker::StubInterface> stub;
  std::string numerics;  // the chosen worker's numerics identity
  // The prefill half of a split: the worker hands off after the first token.
  bool prefill_only = false;
  // The chosen worker's KV transfer address and measured prefill rate: a
  // prefill worker's are where and how fast the decode half pulls from.
  std::string kv_transfer_endpoint;
  double prefill_tokens_per_second = 0.0;
};

class RouteSelector {
 public:
  // `cachemanager` may be null: static workers, no prefix information.
  RouteSelector(WorkerPool& pool, Placement& placement, std::shared_ptr<grpc::Channel> cachemanager,
                RouterMetrics& metrics, RouteSelectorOptions options);

  // UNAVAILABLE when no routable worker is left outside `exclude` (and,
  // when ask.numerics is not empty, with that numerics identity: a stream is
  // resumed only where it continues token for token).
  absl::StatusOr<Route> Choose(const std::string& model_id, PromptBlocks& blocks,
                               const absl::flat_hash_set<std::string>& exclude, const RouteAsk& ask = {});
  // The attempt on `route` ended, however: its load is the worker's own now.
  void Settle(const Route& route) { placement_.Settle(route.decision); }
  // The attempt on `route` was refused or failed before its first token:
  // the worker computed nothing to remember.
  void Retract(const Route& route, const PromptBlocks& blocks) { placement_.Retract(route.decision, blocks.hashes); }
  // The ticket to send with the attempt: which decision of which router it is.
  v1::PlacementTicket TicketOf(const Route& route) const {
    v1::PlacementTicket t;
    t.set_router(route.decision.router_instance);
    t.set_ticket(route.decision.in_flight_ticket);
    return t;
  }

 private:
  // The cachemanager's answer, or nullopt when it could not be asked.
  std::optional<v1::FindOverlapsResponse> FindOverlaps(const std::string& model_id,
                                                       const std::vector<BlockHash>& hashes);

  // Every routable worker as a candidate, with the cachemanager's overlaps
  // (nullopt: it could not be asked).
  std::vector<WorkerCandidate> Candidates(const std::vector<PooledWorker>& workers,
                                          const std::optional<v1::FindOverlapsResponse>& overlaps) const;
  // The prefill half of a split among the prefill workers; nullopt when
  // placement finds none it may choose.
  std::optional<Decision> ChoosePrefillWorker(const PlacementRequest& request, std::vector<WorkerCandidate> prefill,
                                              const absl::flat_hash_set<std::string>& exclude);

  // This router's newest ticket in a worker's load report; 0 if absent.
  uint64_t AdmittedTicketOf(const google::protobuf::RepeatedPtrField<v1::PlacementTicket>& admitted) const;

  WorkerPool& pool_;
  Placement& placement_;
  const std::shared_ptr<grpc::Channel> cachemanager_channel_;
  const std::unique_ptr<v1::CacheManager::Stub> cachemanager_;
  RouterMetrics& metrics_;
  const RouteSelectorOptions options_;
};

}  // namespace kvfleet::router
