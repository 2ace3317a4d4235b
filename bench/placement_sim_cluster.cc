// One policy over one workload on the simulated cluster (placement_sim.h):
// an event queue of request arrivals at the router, deliveries to workers,
// the ends of engine steps and of peer pulls, in simulated seconds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <list>
#include <memory>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "bench/engine_bench.h"
#include "bench/placement_sim.h"
#include "bench/placement_sim_tiers.h"
#include "common/block_hash.h"
#include "common/status_macros.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/pending_prefill.h"
#include "engine/scheduler/scheduler.h"
#include "services/cachemanager/index/kv_map.h"
#include "services/router/placement/placement.h"

namespace kvfleet::bench::placement_sim {
namespace {

using router::Placement;
using Clock = Placement::Clock;

Clock::time_point At(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

constexpr char kModelId[] = "sim";

// What a worker's load report says, as the router reads it, and the
// router's newest ticket it counts.
struct LoadSnapshot {
  WorkerLoad load;
  uint64_t admitted_ticket = 0;
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
  SimWorker(std::string worker_id, const double& now, const SimOptions& o, int32_t num_blocks)
      : id(std::move(worker_id)),
        recorder(now, o),
        tiers(o, &recorder),
        pending(o.cluster.block_size, TiersOn(o) ? static_cast<engine::KvEventListener*>(&tiers) : &recorder),
        pool(num_blocks, &pending),
        kv(pool, o.cluster.block_size, kModelId, /*enable_prefix_caching=*/true),
        scheduler({.max_num_batched_tokens = o.cluster.max_num_batched_tokens,
                   .max_num_seqs = o.cluster.max_num_seqs,
                   .admission_bypass_limit = o.cluster.admission_bypass_limit},
                  kv) {
    pending.Attach(pool);
    if (TiersOn(o)) {
      tiers.Attach(pool);
      kv.set_lower_tiers(&tiers);
    }
  }
  static bool TiersOn(const SimOptions& o) { return o.host_tier_tokens > 0 || o.disk_tier_tokens > 0; }

  std::string id;
  EventRecorder recorder;
  SimTiers tiers;
  engine::PendingPrefill pending;  // the engine's own load figure
  engine::BlockPool pool;
  engine::KvCacheManager kv;
  engine::Scheduler scheduler;
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
std::string TransferEndpoint(const std::string& worker_id) { return absl::StrCat(worker_id, ":kv"); }

// Whether a worker holds a block in any tier: what a source can serve and
// what a puller need not ask for (the engine's HeldHere).
bool Holds(const SimWorker& w, const BlockHash& hash) { return w.pool.IsCached(hash) || w.tiers.InHost(hash); }

enum class EventKind { kArrival, kDelivery, kStepEnd, kPullDone };
struct Event {
  double at;
  uint64_t seq;  // ties in insertion order: deterministic
  EventKind kind;
  size_t index;  // request (arrival, delivery, pull done) or worker (step end)
  size_t worker;
  bool operator>(const Event& o) const { return std::tie(at, seq) > std::tie(o.at, o.seq); }
};

struct LiveRequest {
  std::unique_ptr<engine::Request> request;
  router::Decision decision;
  size_t worker = 0;
  double first_token_at = -1;
  // A pull: the prompt blocks it brings (indices into prompt_block_hashes,
  // in order) and when it started (at the request's first admission try);
  // once done, those it committed.
  std::vector<size_t> pulling;
  double pull_started = 0;
};

class Simulation {
 public:
  Simulation(const Workload& workload, const SimOptions& o)
      : w_(workload),
        o_(o),
        block_bytes_(o.kv_bytes_per_token * o.cluster.block_size),
        links_(o.cluster.workers, o.network_gbps, o.pull_latency_ms / 1000),
        live_(workload.requests.size()) {
    router::PlacementOptions p = o.placement;
    p.policy = o.policy;
    p.router_instance = 1;  // deterministic
    p.peer_pull = o.peer_pull;
    const double assumed_gbps = o.peer_pull_assumed_gbps > 0 ? o.peer_pull_assumed_gbps : o.network_gbps;
    p.peer_pull_assumed_bytes_per_second = assumed_gbps * 1e9 / 8;
    placement_ = std::make_unique<Placement>(p, [this] { return At(now_); });
    const int32_t blocks = static_cast<int32_t>(o.cluster.kv_tokens / o.cluster.block_size);
    for (int32_t i = 0; i < o.cluster.workers; ++i) {
      workers_.push_back(std::make_unique<SimWorker>(absl::StrCat("worker-", i), now_, o_, blocks));
      const std::string& id = workers_.back()->id;
      worker_index_[id] = static_cast<size_t>(i);
      if (o.peer_pull) {
        // The engine's hook: the pull starts at the request's first
        // admission try, so one deep in the queue pulls when it is about to
        // run rather than when it arrives.
        transfer_index_[TransferEndpoint(id)] = static_cast<size_t>(i);
        workers_.back()->kv.set_peer_pull(
            [this, worker = static_cast<size_t>(i)](engine::Request& r) { return StartPull(r, worker); });
      }
      // The cachemanager's own map: registered with its capacity, then the
      // (empty) snapshot a fresh worker sends first.
      (void)index_.Register({.worker_id = id,
                             .incarnation = 1,
                             .endpoint = id,
                             .model_id = kModelId,
                             .block_size = static_cast<int32_t>(o.cluster.block_size),
                             .capacity_blocks = blocks,
                             .host_capacity_blocks = workers_.back()->tiers.host_blocks(),
                             .disk_capacity_blocks = workers_.back()->tiers.disk_blocks()},
                            At(now_));
      (void)index_.Apply({.worker_id = id, .incarnation = 1, .sequence = ++sequence_[id],
                          .events = {{.kind = cachemanager::KvEventRecord::Kind::kSnapshot}}},
                         At(now_));
    }
  }

  absl::StatusOr<SimResult> Run() {
    if (o_.cluster.workers < 1 || o_.cluster.workers > 1024) {
      return absl::InvalidArgumentError("the simulator takes 1 to 1024 workers");
    }
    const int64_t capacity = o_.cluster.kv_tokens;
    for (size_t i = 0; i < w_.requests.size(); ++i) {
      const SimRequest& r = w_.requests[i];
      if (r.prompt_tokens() + static_cast<int64_t>(r.answer.size()) + o_.cluster.block_size > capacity) {
        return absl::InvalidArgumentError(absl::StrCat("request ", i, " needs ", r.prompt_tokens() + r.answer.size(),
                                                       " tokens of KV; a worker holds ", capacity,
                                                       ": raise --kv-tokens"));
      }
      Push(r.arrival_s, EventKind::kArrival, i, 0);
    }
    int64_t events = 0;
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      now_ = e.at;
      if (++events > 200'000'000) return absl::InternalError("the simulation made no progress");
      switch (e.kind) {
        case EventKind::kArrival:
          RETURN_IF_ERROR(Route(e.index));
          break;
        case EventKind::kDelivery:
          Deliver(e.index, e.worker);
          break;
        case EventKind::kStepEnd:
          EndStep(e.worker);
          break;
        case EventKind::kPullDone:
          FinishPull(e.index, e.worker);
          break;
      }
    }
    return Summarize();
  }

 private:
  void Push(double at, EventKind kind, size_t index, size_t worker) {
    queue_.push({.at = at, .seq = next_seq_++, .kind = kind, .index = index, .worker = worker});
  }

  // The index sees every event that has arrived by now, as the batches a
  // worker's publisher sends (runs of stores and removals, in order).
  void ApplyVisibleEvents() {
    using Kind = cachemanager::KvEventRecord::Kind;
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::deque<KvEvent>& events = workers_[i]->recorder.events;
      cachemanager::KvEventBatch batch{.worker_id = workers_[i]->id, .incarnation = 1};
      while (!events.empty() && events.front().visible_at <= now_) {
        const KvEvent& e = events.front();
        const Kind kind = e.stored ? Kind::kStored : Kind::kRemoved;
        if (batch.events.empty() || batch.events.back().kind != kind || batch.events.back().tier != e.tier) {
          batch.events.push_back({.kind = kind, .tier = e.tier});
        }
        batch.events.back().hashes.push_back(e.hash);
        events.pop_front();
      }
      if (!batch.events.empty()) {
        batch.sequence = ++sequence_[batch.worker_id];
        (void)index_.Apply(batch, At(now_));  // in sequence from a registered worker: always accepted
      }
      SimWorker& w = *workers_[i];
      if (w.changed && w.changed_at + o_.load_delay_ms / 1000 <= now_) {
        w.visible = Snapshot(w);
        w.changed = false;
      }
    }
  }

  // Each worker's leading matched blocks (any tier, and how many below the
  // device), from the cachemanager's FindOverlaps.
  std::vector<cachemanager::WorkerOverlapInfo> Overlaps(const std::vector<BlockHash>& hashes) const {
    std::vector<cachemanager::WorkerOverlapInfo> matched(workers_.size());
    for (cachemanager::WorkerOverlapInfo& o : index_.FindOverlaps(kModelId, hashes)) {
      const size_t k = worker_index_.at(o.worker.descriptor.worker_id);
      matched[k] = std::move(o);
    }
    return matched;
  }

  absl::Status Route(size_t i) {
    const SimRequest& r = w_.requests[i];
    engine::EngineRequest params{.id = RequestId(i + 1), .prompt = r.Prompt()};
    params.stopping = {.max_tokens = static_cast<int32_t>(r.answer.size()), .ignore_eos = true};
    auto request = std::make_unique<engine::Request>(std::move(params), 0, 0, nullptr);
    request->prompt_block_hashes =
        HashFullBlocks(RootBlockHash(kModelId, ""), request->params.prompt, o_.cluster.block_size);
    ApplyVisibleEvents();
    router::PlacementRequest pr{.block_hashes = request->prompt_block_hashes,
                                .prompt_tokens = request->num_prompt_tokens(),
                                .block_size = o_.cluster.block_size};
    if (o_.sessions) pr.session_id = r.session_id;
    const std::vector<cachemanager::WorkerOverlapInfo> matched =
        o_.policy == router::Policy::kRoundRobin ? std::vector<cachemanager::WorkerOverlapInfo>(workers_.size())
                                                 : Overlaps(pr.block_hashes);
    std::vector<router::WorkerCandidate> candidates;
    candidates.reserve(workers_.size());
    for (size_t k = 0; k < workers_.size(); ++k) {
      const LoadSnapshot& l = workers_[k]->visible;
      router::WorkerCandidate c{.worker_id = workers_[k]->id,
                                .endpoint = workers_[k]->id,
                                .matched_blocks = matched[k].matched_blocks,
                                .host_blocks = matched[k].host_blocks,
                                .disk_blocks = matched[k].disk_blocks,
                                .load = l.load,
                                .max_num_seqs = o_.cluster.max_num_seqs,
                                .admitted_ticket = l.admitted_ticket};
      if (c.load.blocks_total == 0) {  // no report yet: an idle worker
        c.load.blocks_free = c.load.blocks_total = workers_[k]->pool.num_blocks();
      }
      c.load.prefill_tokens_per_second = o_.cluster.PeakTokensPerSecond();
      // What the worker measures loading a block from each tier.
      if (workers_[k]->tiers.host_blocks() > 0) c.load.host_load_seconds_per_block = workers_[k]->tiers.host_seconds();
      if (workers_[k]->tiers.disk_blocks() > 0) c.load.disk_load_seconds_per_block = workers_[k]->tiers.disk_seconds();
      if (o_.peer_pull) {  // GetInfo's transfer address and the report's block size on the wire
        c.kv_transfer_endpoint = TransferEndpoint(workers_[k]->id);
        c.load.kv_block_bytes = block_bytes_;
      }
      candidates.push_back(std::move(c));
    }
    absl::StatusOr<router::Decision> d = placement_->Choose(pr, std::move(candidates));
    if (!d.ok()) return d.status();
    if (d->peer_pull.has_value()) ++pull_decisions_;
    if (d->pull_declined) ++pulls_declined_;
    const size_t worker = static_cast<size_t>(std::stoi(d->worker_id.substr(std::string("worker-").size())));
    // The worker's request carries the source, as the router's gRPC call does.
    if (o_.peer_pull && d->peer_pull.has_value()) {
      request->params.kv_peer =
          engine::KvPeerSource{.endpoint = d->peer_pull->endpoint, .blocks = d->peer_pull->blocks};
    }
    live_[i] = {.request = std::move(request), .decision = *std::move(d), .worker = worker};
    Push(now_ + o_.router_ms / 1000, EventKind::kDelivery, i, worker);
    return absl::OkStatus();
  }

  void Report(SimWorker& w) {
    w.changed = true;
    w.changed_at = now_;
  }

  LoadSnapshot Snapshot(const SimWorker& w) const {
    const engine::BlockPoolStats pool = w.pool.Stats();
    return {.load = {.running = w.scheduler.num_running(),
                     .waiting = w.scheduler.num_waiting() + static_cast<int32_t>(w.inbox.size()),
                     .blocks_used = pool.used,
                     .blocks_free = pool.free(),
                     .blocks_total = pool.total,
                     .pending_prefill_tokens = w.pending.tokens(),
                     .peer_pull_seconds_per_block = w.pull_seconds_per_block},
            .admitted_ticket = w.admitted_ticket};
  }

  void NoteRunning(SimWorker& w) {
    w.running_area += w.last_running * (now_ - w.last_change);
    w.last_change = now_;
    w.last_running = w.scheduler.num_running();
  }

  void Deliver(size_t i, size_t worker) {
    SimWorker& w = *workers_[worker];
    w.inbox.push_back(live_[i].request.get());
    w.pending.Add(*live_[i].request);
    w.admitted_ticket = std::max(w.admitted_ticket, live_[i].decision.in_flight_ticket);
    Report(w);  // on admission
    if (!w.busy) StartStep(worker);
  }

  // The engine's StartPeerPull, called by the worker's KvCacheManager at
  // the request's first admission try: the prompt's leading blocks its
  // kv_peer names (never one that ends the prompt) that this worker holds in
  // no tier, cut to the pool's free blocks (past them, committing the last
  // would evict the first), of which the source sends the leading run it
  // still holds (it may have evicted some since the index saw them). True:
  // the request waits (kv_loading) while the worker steps for the others.
  bool StartPull(engine::Request& r, size_t worker) {
    const std::optional<engine::KvPeerSource>& peer = r.params.kv_peer;
    if (!peer.has_value()) return false;
    const SimWorker& w = *workers_[worker];
    const size_t source = transfer_index_.at(peer->endpoint);
    const int64_t reachable = std::max<int64_t>(r.num_tokens() - 1, 0) / o_.cluster.block_size;
    const int64_t asked =
        std::min<int64_t>({std::max(peer->blocks, 0), static_cast<int64_t>(r.prompt_block_hashes.size()), reachable});
    std::vector<size_t> wanted;
    for (int64_t k = 0; k < asked; ++k) {
      if (!Holds(w, r.prompt_block_hashes[static_cast<size_t>(k)])) wanted.push_back(static_cast<size_t>(k));
    }
    wanted.resize(std::min<size_t>(wanted.size(), static_cast<size_t>(std::max(w.pool.num_free(), 0))));
    size_t served = 0;
    while (served < wanted.size() && Holds(*workers_[source], r.prompt_block_hashes[wanted[served]])) ++served;
    wanted.resize(served);
    if (wanted.empty()) return false;
    r.kv_loading = true;
    ++pulls_;
    const size_t i = r.id().value() - 1;
    LiveRequest& l = live_[i];
    l.pull_started = now_;
    const double done = links_.Pull(source, worker, static_cast<int64_t>(wanted.size()) * block_bytes_, now_);
    l.pulling = std::move(wanted);
    Push(done, EventKind::kPullDone, i, worker);
    return true;
  }

  // The engine's FinishPeerPull: each block is committed as cached (its
  // KV events tell the index) and held until all are in, so that allocating
  // the next never evicts one just committed; then they are released last
  // first (the head evicted last). The request may be admitted, and the
  // pull's time per block feeds the worker's next load report.
  void FinishPull(size_t i, size_t worker) {
    SimWorker& w = *workers_[worker];
    LiveRequest& l = live_[i];
    engine::Request& r = *l.request;
    int64_t committed = 0;
    std::vector<BlockId> held;
    for (size_t k : l.pulling) {
      const BlockHash& hash = r.prompt_block_hashes[k];
      if (!w.pool.IsCached(hash)) {
        const std::optional<BlockId> block = w.pool.Allocate();
        if (!block.has_value()) break;  // the cache is full of running requests: compute the rest
        w.pool.Commit(*block, hash, k > 0 ? std::optional<BlockHash>(r.prompt_block_hashes[k - 1]) : std::nullopt);
        held.push_back(*block);
      }
      ++committed;
    }
    // Cached at the free list's tail, where the admission's prefix lookup finds them.
    for (auto b = held.rbegin(); b != held.rend(); ++b) w.pool.Release(*b);
    l.pulling.resize(static_cast<size_t>(committed));
    r.kv_loading = false;
    blocks_pulled_ += committed;
    if (committed > 0) {
      const double per_block = (now_ - l.pull_started) / static_cast<double>(committed);
      double& smoothed = w.pull_seconds_per_block;
      smoothed = smoothed > 0 ? 0.8 * smoothed + 0.2 * per_block : per_block;
    }
    Report(w);
    if (!w.busy) StartStep(worker);
  }

  void StartStep(size_t worker) {
    SimWorker& w = *workers_[worker];
    for (engine::Request* r : w.inbox) {
      r->arrival = w.next_arrival++;
      w.scheduler.Add(r);
    }
    w.inbox.clear();
    w.step = w.scheduler.Schedule();
    NoteRunning(w);
    if (w.step.empty()) {
      w.busy = false;
      return;
    }
    int64_t kv_read = 0;
    for (const engine::ScheduledChunk& c : w.step.chunks) kv_read += c.request->num_computed_tokens + c.num_tokens;
    w.busy = true;
    // Blocks the admissions loaded from a lower tier delay the step.
    const double load = w.tiers.TakeLoadSeconds();
    Push(now_ + load + o_.cluster.model.Seconds(w.step.num_tokens, kv_read), EventKind::kStepEnd, 0, worker);
  }

  void EndStep(size_t worker) {
    SimWorker& w = *workers_[worker];
    for (const engine::ScheduledChunk& c : w.step.chunks) {
      engine::Request* r = c.request;
      r->num_computed_tokens += c.num_tokens;
      tokens_computed_ += c.num_tokens;
      w.kv.CommitFullBlocks(*r);
      if (r->num_computed_tokens < r->num_tokens()) continue;  // a prefill chunk
      const size_t i = r->id().value() - 1;
      LiveRequest& l = live_[i];
      w.pending.Computed(*r);
      if (l.first_token_at < 0) {
        l.first_token_at = now_;
        ttft_.push_back(now_ - w_.requests[i].arrival_s);
      }
      r->tokens.push_back(w_.requests[i].answer[static_cast<size_t>(r->num_output_tokens())]);
      if (r->num_output_tokens() >= r->params.stopping.max_tokens) Finish(w, i);
    }
    NoteRunning(w);
    Report(w);
    StartStep(worker);
  }

  void Finish(SimWorker& w, size_t i) {
    LiveRequest& l = live_[i];
    engine::Request& r = *l.request;
    prompt_tokens_ += r.num_prompt_tokens();
    // Pulled blocks the admission's prefix hit still found: the rest were
    // evicted between the commit and the admission (or by the commit
    // itself, when the pull was larger than the free blocks).
    const size_t hit_blocks = static_cast<size_t>(std::max(0, r.cached_prompt_tokens) / o_.cluster.block_size);
    for (size_t k : l.pulling) pulled_blocks_hit_ += k < hit_blocks ? 1 : 0;
    l.pulling = {};
    cached_tokens_ += std::max(0, r.cached_prompt_tokens);
    served_tokens_ += r.num_prompt_tokens() + r.num_output_tokens();
    w.scheduler.Remove(&r);
    w.pending.Remove(r);
    placement_->Settle(l.decision);
    last_finish_ = now_;
    ++finished_;
    l.request.reset();
  }

  SimResult Summarize() {
    SimResult s{.policy = std::string(router::PolicyName(o_.policy)),
                .requests = static_cast<int64_t>(w_.requests.size()),
                .finished = finished_,
                .ttft_p50_s = Percentile(ttft_, 50),
                .ttft_p90_s = Percentile(ttft_, 90),
                .ttft_p99_s = Percentile(ttft_, 99),
                .tokens_computed = tokens_computed_,
                .tokens_served = served_tokens_,
                .pull_decisions = pull_decisions_,
                .pulls = pulls_,
                .blocks_pulled = blocks_pulled_,
                .pulled_blocks_hit = pulled_blocks_hit_,
                .pulls_declined = pulls_declined_};
    const double start = w_.requests.empty() ? 0 : w_.requests.front().arrival_s;
    s.makespan_s = last_finish_ - start;
    s.throughput_tokens_per_s = s.makespan_s > 0 ? static_cast<double>(served_tokens_) / s.makespan_s : 0;
    s.hit_ratio = prompt_tokens_ > 0 ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0;
    int64_t loaded = 0;
    for (const auto& w : workers_) loaded += w->tiers.loaded_blocks();
    s.lower_tier_hit_ratio =
        prompt_tokens_ > 0 ? static_cast<double>(loaded * o_.cluster.block_size) / static_cast<double>(prompt_tokens_)
                           : 0;
    double sum = 0;
    for (auto& w : workers_) {
      NoteRunning(*w);
      const double mean = s.makespan_s > 0 ? w->running_area / s.makespan_s : 0;
      s.max_running = std::max(s.max_running, mean);
      sum += mean;
      s.preemptions += w->scheduler.num_preemptions();
      const engine::BlockPoolStats stats = w->pool.Stats(), recount = w->pool.Recount();
      if (stats.used != 0 || stats.cached != recount.cached || stats.empty != recount.empty ||
          recount.used != 0) {
        s.audit = absl::StrCat(w->id, ": ", stats.used, " blocks still in use after every request finished (",
                               recount.used, " on a recount)");
      }
    }
    s.mean_running = sum / static_cast<double>(workers_.size());
    if (finished_ != s.requests && s.audit.empty()) {
      s.audit = absl::StrCat(s.requests - finished_, " requests never finished");
    }
    return s;
  }

  const Workload& w_;
  const SimOptions& o_;
  const int64_t block_bytes_;  // one KV block on the wire
  PeerLinks links_;
  double now_ = 0;
  std::unique_ptr<Placement> placement_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
  std::vector<LiveRequest> live_;
  // The cachemanager's index, fed by the workers' events as they arrive.
  cachemanager::KvMap index_{{.liveness_deadline = std::chrono::hours(24 * 365)}};  // no simulated worker dies
  absl::flat_hash_map<std::string, uint64_t> sequence_;  // each worker's last batch
  absl::flat_hash_map<std::string, size_t> worker_index_;
  absl::flat_hash_map<std::string, size_t> transfer_index_;  // a worker's transfer endpoint: its index
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t next_seq_ = 0;
  std::vector<double> ttft_;
  int64_t tokens_computed_ = 0, prompt_tokens_ = 0, cached_tokens_ = 0, served_tokens_ = 0, finished_ = 0;
  int64_t pull_decisions_ = 0, pulls_ = 0, blocks_pulled_ = 0, pulled_blocks_hit_ = 0, pulls_declined_ = 0;
  double last_finish_ = 0;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Workload& workload, const SimOptions& options) {
  Simulation sim(workload, options);
  return sim.Run();
}

}  // namespace kvfleet::bench::placement_sim
