// The placement simulator's event-driven cluster (placement_sim.h), shared by
// the files that implement it; nothing outside bench/placement_sim_*.cc
// includes it.
//
//   - placement_sim_cluster.cc: the event loop, routing, deliveries, steps;
//   - placement_sim_peer_pull.cc: a worker's pull from a peer (and the links);
//   - placement_sim_split.cc: worker roles, the split, the handoff, leases;
//   - placement_sim_latency.cc: TTFT, inter-token gaps, goodput, the summary.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/placement_sim.h"
#include "bench/placement_sim_lora.h"
#include "bench/placement_sim_tiers.h"
#include "common/block_hash.h"
#include "common/worker_role.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/kv/kv_leases.h"
#include "engine/pending_prefill.h"
#include "engine/scheduler/scheduler.h"
#include "services/cachemanager/index/kv_map.h"
#include "services/router/placement/placement.h"

namespace kvfleet::bench::placement_sim::detail {

using Clock = router::Placement::Clock;

// Simulated seconds as the clock the router's Placement and the engine's
// leases read.
inline Clock::time_point At(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

inline constexpr char kModelId[] = "sim";

// What a worker's load report says, as the router reads it, and the
// router's newest ticket it counts.
struct LoadSnapshot {
  WorkerLoad load;
  uint64_t admitted_ticket = 0;
  std::vector<std::string> resident_lora;  // the identities in its LoRA slots
};

struct KvEvent {
  double visible_at;
  BlockHash hash;
  bool stored;
  KvTier tier = KvTier::kDevice;  // stored: where
};

// The worker's KV events, stamped with when the index will see them: at
// the publisher's next flush, plus transit.
class EventRecorder : public engine::KvEventListener {
 public:
  EventRecorder(const double& now, const SimOptions& o) : now_(now), o_(o) {}
  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>&) override { Add(hash, true); }
  void OnBlockRemoved(const BlockHash& hash) override { Add(hash, false); }
  void OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>&, KvTier tier) override {
    Add(hash, true, tier);
  }
  void OnAllCleared() override {}
  std::deque<KvEvent> events;

 private:
  void Add(const BlockHash& hash, bool stored, KvTier tier = KvTier::kDevice) {
    const double flush = o_.event_flush_ms / 1000;
    const double at = flush > 0 ? std::ceil(now_ / flush) * flush : now_;
    events.push_back({at + o_.event_delay_ms / 1000, hash, stored, tier});
  }
  const double& now_;
  const SimOptions& o_;
};

struct SimWorker {
  SimWorker(std::string worker_id, WorkerRole worker_role, const double& now, const SimOptions& o, int32_t num_blocks)
      : id(std::move(worker_id)),
        role(worker_role),
        recorder(now, o),
        tiers(o, &recorder),
        pending(o.cluster.block_size, TiersOn(o) ? static_cast<engine::KvEventListener*>(&tiers) : &recorder),
        pool(num_blocks, &pending),
        kv(pool, o.cluster.block_size, kModelId, /*enable_prefix_caching=*/true),
        lora(o.max_loras, o.lora_load_ms / 1000),
        scheduler({.max_num_batched_tokens = o.cluster.max_num_batched_tokens,
                   .max_num_seqs = o.cluster.max_num_seqs,
                   .admission_bypass_limit = o.cluster.admission_bypass_limit},
                  kv, &lora),
        leases(pool, num_blocks / 2) {  // the engine's bound: half the pool
    pending.Attach(pool);
    if (TiersOn(o)) {
      tiers.Attach(pool);
      kv.set_lower_tiers(&tiers);
    }
  }
  static bool TiersOn(const SimOptions& o) { return o.host_tier_tokens > 0 || o.disk_tier_tokens > 0; }

  std::string id;
  WorkerRole role;
  EventRecorder recorder;
  SimTiers tiers;
  engine::PendingPrefill pending;  // the engine's own load figure
  engine::BlockPool pool;
  engine::KvCacheManager kv;
  SimLoraSlots lora;  // the scheduler's run gate, so before it
  engine::Scheduler scheduler;
  // A prefill worker's prompts held for decode workers' pulls (declared
  // after the pool: its blocks go back before the pool goes).
  engine::KvLeases leases;
  std::vector<engine::Request*> inbox;
  bool busy = false;
  engine::SchedulerOutput step;
  // Reports are taken lazily: a worker that changed (a step ended, a
  // request arrived) is read again once that change is load_delay old;
  // until then the router sees the report before it.
  bool changed = false;
  double changed_at = 0;
  LoadSnapshot visible;
  uint64_t admitted_ticket = 0;
  uint64_t next_arrival = 0;
  // Running requests integrated over time, for the time-averaged figure.
  double running_area = 0, last_change = 0;
  int32_t last_running = 0;
  // Its pulls' seconds per block, smoothed as the engine smooths them (0
  // until its first pull); the router prices its next pull by it.
  double pull_seconds_per_block = 0;
};

// A worker's KV transfer address, as GetInfo reports it.
inline std::string TransferEndpoint(const std::string& worker_id) { return absl::StrCat(worker_id, ":kv"); }

// Whether a worker holds a block in any tier: what a source can serve and
// what a puller need not ask for (the engine's HeldHere).
inline bool Holds(const SimWorker& w, const BlockHash& hash) { return w.pool.IsCached(hash) || w.tiers.InHost(hash); }

enum class EventKind {
  kArrival,      // a trace request reaches the router
  kDelivery,     // a decision reaches its worker
  kStepEnd,      // a worker's step ends
  kPullDone,     // a peer pull's bytes are in
  kHandoff,      // a prefill worker's handoff reaches the router
  kLeaseExpiry,  // a prefill worker's lease deadline
};
struct Event {
  double at;
  uint64_t seq;  // ties in insertion order: deterministic
  EventKind kind;
  size_t index;  // request (arrival, delivery, pull done, handoff) or worker (step end, lease expiry)
  size_t worker;
  bool operator>(const Event& o) const { return std::tie(at, seq) > std::tie(o.at, o.seq); }
};

// Which part of a trace request a worker runs: all of it, or (split) the
// prompt and first token on a prefill worker, then the rest on a decode
// worker. Both halves carry the trace request's RequestId, one at a time.
enum class Phase { kWhole, kPrefill, kDecode };

struct LiveRequest {
  std::unique_ptr<engine::Request> request;
  router::Decision decision;
  size_t worker = 0;
  Phase phase = Phase::kWhole;
  // Its tokens as the client sees them (when each step ends): the first's
  // time, the last's, and the gaps between consecutive ones.
  double first_token_at = -1, last_token_at = -1;
  std::vector<double> gaps;
  // A split's first token while the router holds it (from its prefill
  // worker's step end until the decode worker's first token).
  double held_at = -1;
  // A split: the prefill worker that holds the prompt under its lease.
  size_t prefill_worker = 0;
  // A pull: the prompt blocks it brings (indices into prompt_block_hashes,
  // in order), from which worker, and when it started (at the request's
  // first admission try); once done, those it committed.
  std::vector<size_t> pulling;
  size_t pull_source = 0;
  double pull_started = 0;
};

class Simulation {
 public:
  Simulation(const Workload& workload, const SimOptions& o);
  absl::StatusOr<SimResult> Run();

 private:
  // placement_sim_cluster.cc
  void Push(double at, EventKind kind, size_t index, size_t worker);
  void ApplyVisibleEvents();
  std::vector<cachemanager::WorkerOverlapInfo> Overlaps(const std::vector<BlockHash>& hashes) const;
  // The router's candidates among `workers` (indices), as route_selector builds them.
  // `lora`: the identity of the request's adapter (empty: none), whose
  // residency the candidates report when the router places by it.
  std::vector<router::WorkerCandidate> Candidates(const std::string& lora, const std::vector<size_t>& workers,
                                                  const std::vector<cachemanager::WorkerOverlapInfo>& matched) const;
  // The trace request's engine request; a decode half also carries the
  // first token, as resumed output (what the router sends after a handoff).
  std::unique_ptr<engine::Request> NewRequest(size_t i, Phase phase = Phase::kWhole) const;
  router::PlacementRequest PlacementRequestFor(size_t i, const engine::Request& request) const;
  absl::Status Route(size_t i);
  // Sends the request where `decision` says, with its pull source, and
  // tracks it as `phase` there.
  void Dispatch(size_t i, std::unique_ptr<engine::Request> request, router::Decision decision, Phase phase);
  size_t WorkerIndex(const std::string& worker_id) const { return worker_index_.at(worker_id); }
  void Report(SimWorker& w);
  LoadSnapshot Snapshot(const SimWorker& w) const;
  void NoteRunning(SimWorker& w);
  void Deliver(size_t i, size_t worker);
  void StartStep(size_t worker);
  void EndStep(size_t worker);
  void Finish(SimWorker& w, size_t i);
  // Takes the request off its worker's scheduler and the router's in-flight count.
  void Release(SimWorker& w, size_t i);

  // placement_sim_peer_pull.cc
  bool StartPull(engine::Request& r, size_t worker);
  void FinishPull(size_t i, size_t worker);

  // placement_sim_split.cc
  absl::Status RouteWithRoles(size_t i, std::unique_ptr<engine::Request> request, const router::PlacementRequest& pr,
                              const std::vector<cachemanager::WorkerOverlapInfo>& matched);
  void HandOff(SimWorker& w, size_t i);
  absl::Status RouteDecodeHalf(size_t i);
  void ExpireLeases(size_t worker);
  static std::string LeaseId(size_t i) { return absl::StrCat("split-", i + 1); }

  // placement_sim_latency.cc
  void OnToken(size_t i);
  void ScoreRequest(size_t i);  // at its last token: against the objectives
  SimResult Summarize();

  const Workload& w_;
  const SimOptions& o_;
  const int64_t block_bytes_;  // one KV block on the wire
  PeerLinks links_;
  double now_ = 0;
  std::unique_ptr<router::Placement> placement_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
  // By role, in worker order: those that take whole requests and decode
  // halves (all of them without prefill workers), and the prefill workers.
  std::vector<size_t> decoders_, prefillers_;
  std::vector<LiveRequest> live_;
  // The cachemanager's index, fed by the workers' events as they arrive.
  cachemanager::KvMap index_{{.liveness_deadline = std::chrono::hours(24 * 365)}};  // no simulated worker dies
  absl::flat_hash_map<std::string, uint64_t> sequence_;                             // each worker's last batch
  absl::flat_hash_map<std::string, size_t> worker_index_;
  absl::flat_hash_map<std::string, size_t> transfer_index_;  // a worker's transfer endpoint: its index
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t next_seq_ = 0;
  std::vector<double> ttft_, itl_, handoff_gaps_;
  int64_t tokens_computed_ = 0, prompt_tokens_ = 0, cached_tokens_ = 0, served_tokens_ = 0, finished_ = 0;
  int64_t pull_decisions_ = 0, pulls_ = 0, blocks_pulled_ = 0, pulled_blocks_hit_ = 0, pulls_declined_ = 0;
  int64_t splits_ = 0, splits_priced_out_ = 0, handoff_pulls_ = 0;
  double handoff_pull_seconds_ = 0;
  int64_t ttft_met_ = 0, itl_met_ = 0, both_met_ = 0, long_ = 0, long_met_ = 0;
  double last_finish_ = 0;
};

}  // namespace kvfleet::bench::placement_sim::detail
