// One policy over one workload on the simulated cluster (placement_sim.h,
// placement_sim_cluster.h): an event queue of request arrivals at the
// router, deliveries to workers, the ends of engine steps and of peer pulls,
// handoffs and lease deadlines, in simulated seconds.
#include "bench/placement_sim_cluster.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::bench::placement_sim {
namespace detail {

using router::Placement;

Simulation::Simulation(const Workload& workload, const SimOptions& o)
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
    const WorkerRole role = o.prefill_workers == 0  ? WorkerRole::kBoth
                            : i < o.prefill_workers ? WorkerRole::kPrefill
                                                    : WorkerRole::kDecode;
    workers_.push_back(std::make_unique<SimWorker>(absl::StrCat("worker-", i), role, now_, o_, blocks));
    (Decodes(role) ? decoders_ : prefillers_).push_back(static_cast<size_t>(i));
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
    (void)index_.Apply({.worker_id = id,
                        .incarnation = 1,
                        .sequence = ++sequence_[id],
                        .events = {{.kind = cachemanager::KvEventRecord::Kind::kSnapshot}}},
                       At(now_));
  }
}

absl::StatusOr<SimResult> Simulation::Run() {
  if (o_.cluster.workers < 1 || o_.cluster.workers > 1024) {
    return absl::InvalidArgumentError("the simulator takes 1 to 1024 workers");
  }
  if (o_.prefill_workers < 0 || o_.prefill_workers >= o_.cluster.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill workers must leave a decode worker: ", o_.prefill_workers, " of ", o_.cluster.workers));
  }
  if (o_.prefill_workers > 0 && !o_.peer_pull) {
    return absl::InvalidArgumentError("prefill workers need peer pulls on: the decode half pulls the prompt");
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
      case EventKind::kHandoff:
        RETURN_IF_ERROR(RouteDecodeHalf(e.index));
        break;
      case EventKind::kLeaseExpiry:
        ExpireLeases(e.worker);
        break;
    }
  }
  return Summarize();
}

void Simulation::Push(double at, EventKind kind, size_t index, size_t worker) {
  queue_.push({.at = at, .seq = next_seq_++, .kind = kind, .index = index, .worker = worker});
}

// The index sees every event that has arrived by now, as the batches a
// worker's publisher sends (runs of stores and removals, in order).
void Simulation::ApplyVisibleEvents() {
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
std::vector<cachemanager::WorkerOverlapInfo> Simulation::Overlaps(const std::vector<BlockHash>& hashes) const {
  std::vector<cachemanager::WorkerOverlapInfo> matched(workers_.size());
  if (o_.policy == router::Policy::kRoundRobin) return matched;  // the router does not ask
  for (cachemanager::WorkerOverlapInfo& o : index_.FindOverlaps(kModelId, hashes)) {
    const size_t k = worker_index_.at(o.worker.descriptor.worker_id);
    matched[k] = std::move(o);
  }
  return matched;
}

std::vector<router::WorkerCandidate> Simulation::Candidates(
    const std::string& lora, const std::vector<size_t>& workers,
    const std::vector<cachemanager::WorkerOverlapInfo>& matched) const {
  std::vector<router::WorkerCandidate> candidates;
  candidates.reserve(workers.size());
  for (size_t k : workers) {
    const SimWorker& w = *workers_[k];
    const LoadSnapshot& l = w.visible;
    router::WorkerCandidate c{.worker_id = w.id,
                              .endpoint = w.id,
                              .matched_blocks = matched[k].matched_blocks,
                              .host_blocks = matched[k].host_blocks,
                              .disk_blocks = matched[k].disk_blocks,
                              .load = l.load,
                              .max_num_seqs = o_.cluster.max_num_seqs,
                              .admitted_ticket = l.admitted_ticket};
    if (c.load.blocks_total == 0) {  // no report yet: an idle worker
      c.load.blocks_free = c.load.blocks_total = w.pool.num_blocks();
    }
    c.load.prefill_tokens_per_second = o_.cluster.PeakTokensPerSecond();
    // What the worker measures loading a block from each tier.
    if (w.tiers.host_blocks() > 0) c.load.host_load_seconds_per_block = w.tiers.host_seconds();
    if (w.tiers.disk_blocks() > 0) c.load.disk_load_seconds_per_block = w.tiers.disk_seconds();
    if (o_.peer_pull) {  // GetInfo's transfer address and the report's block size on the wire
      c.kv_transfer_endpoint = TransferEndpoint(w.id);
      c.load.kv_block_bytes = block_bytes_;
    }
    if (!lora.empty() && o_.lora_aware) {  // the worker's stats: its resident adapters, its slot load time
      c.lora_resident = std::find(l.resident_lora.begin(), l.resident_lora.end(), lora) != l.resident_lora.end();
      c.lora_load_seconds = o_.lora_load_ms / 1000;
    }
    candidates.push_back(std::move(c));
  }
  return candidates;
}

std::unique_ptr<engine::Request> Simulation::NewRequest(size_t i, Phase phase) const {
  const SimRequest& r = w_.requests[i];
  engine::EngineRequest params{.id = RequestId(i + 1), .prompt = r.Prompt()};
  params.stopping = {.max_tokens = static_cast<int32_t>(r.answer.size()), .ignore_eos = true};
  if (phase == Phase::kDecode) params.resumed_output = {r.answer.front()};
  auto request = std::make_unique<engine::Request>(std::move(params), 0, 0, nullptr);
  // An adapter's requests hash under its identity, as the engine and the router do.
  if (r.adapter >= 0) request->lora_identity = absl::StrCat("adapter-", r.adapter, "@sim");
  request->prompt_block_hashes = HashFullBlocks(RootBlockHash(kModelId, "", "", request->lora_identity),
                                                request->params.prompt, o_.cluster.block_size);
  return request;
}

router::PlacementRequest Simulation::PlacementRequestFor(size_t i, const engine::Request& request) const {
  router::PlacementRequest pr{.block_hashes = request.prompt_block_hashes,
                              .prompt_tokens = request.num_prompt_tokens(),
                              .block_size = o_.cluster.block_size};
  if (o_.sessions) pr.session_id = w_.requests[i].session_id;
  return pr;
}

absl::Status Simulation::Route(size_t i) {
  std::unique_ptr<engine::Request> request = NewRequest(i);
  ApplyVisibleEvents();
  const router::PlacementRequest pr = PlacementRequestFor(i, *request);
  const std::vector<cachemanager::WorkerOverlapInfo> matched = Overlaps(pr.block_hashes);
  if (!prefillers_.empty()) return RouteWithRoles(i, std::move(request), pr, matched);
  absl::StatusOr<router::Decision> d = placement_->Choose(pr, Candidates(request->lora_identity, decoders_, matched));
  if (!d.ok()) return d.status();
  Dispatch(i, std::move(request), *std::move(d), Phase::kWhole);
  return absl::OkStatus();
}

void Simulation::Dispatch(size_t i, std::unique_ptr<engine::Request> request, router::Decision decision, Phase phase) {
  if (decision.peer_pull.has_value()) ++pull_decisions_;
  if (decision.pull_declined) ++pulls_declined_;
  const size_t worker = WorkerIndex(decision.worker_id);
  // The worker's request carries the source, as the router's gRPC call does.
  if (o_.peer_pull && decision.peer_pull.has_value()) {
    request->params.kv_peer =
        engine::KvPeerSource{.endpoint = decision.peer_pull->endpoint, .blocks = decision.peer_pull->blocks};
  }
  LiveRequest& l = live_[i];
  l.request = std::move(request);
  l.decision = std::move(decision);
  l.worker = worker;
  l.phase = phase;
  Push(now_ + o_.router_ms / 1000, EventKind::kDelivery, i, worker);
}

void Simulation::Report(SimWorker& w) {
  w.changed = true;
  w.changed_at = now_;
}

LoadSnapshot Simulation::Snapshot(const SimWorker& w) const {
  const engine::BlockPoolStats pool = w.pool.Stats();
  return {.load = {.running = w.scheduler.num_running(),
                   .waiting = w.scheduler.num_waiting() + static_cast<int32_t>(w.inbox.size()),
                   .blocks_used = pool.used,
                   .blocks_free = pool.free(),
                   .blocks_total = pool.total,
                   .pending_prefill_tokens = w.pending.tokens(),
                   .peer_pull_seconds_per_block = w.pull_seconds_per_block},
          .admitted_ticket = w.admitted_ticket,
          .resident_lora = w.lora.Resident()};
}

void Simulation::NoteRunning(SimWorker& w) {
  w.running_area += w.last_running * (now_ - w.last_change);
  w.last_change = now_;
  w.last_running = w.scheduler.num_running();
}

void Simulation::Deliver(size_t i, size_t worker) {
  SimWorker& w = *workers_[worker];
  w.inbox.push_back(live_[i].request.get());
  w.pending.Add(*live_[i].request);
  w.admitted_ticket = std::max(w.admitted_ticket, live_[i].decision.in_flight_ticket);
  // As Engine::Submit: a split request's pull starts at its arrival while
  // nothing waits and a running slot is free (counting it), not at the
  // next step's admission.
  engine::Request& r = *live_[i].request;
  const int64_t in_flight =
      int64_t{w.scheduler.num_running()} + w.scheduler.num_waiting() + static_cast<int64_t>(w.inbox.size());
  if (r.params.kv_peer.has_value() && !r.params.kv_peer->lease_id.empty() && w.scheduler.num_waiting() == 0 &&
      w.inbox.size() == 1 && in_flight <= o_.cluster.max_num_seqs) {
    StartPull(r, worker);
  }
  Report(w);  // on admission
  if (!w.busy) StartStep(worker);
}

void Simulation::StartStep(size_t worker) {
  SimWorker& w = *workers_[worker];
  w.leases.Expire(At(now_));  // as the engine, every step
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
  const double load = w.tiers.TakeLoadSeconds() + w.lora.TakeLoadSeconds();
  Push(now_ + load + o_.cluster.model.Seconds(w.step.num_tokens, kv_read), EventKind::kStepEnd, 0, worker);
}

void Simulation::EndStep(size_t worker) {
  SimWorker& w = *workers_[worker];
  for (const engine::ScheduledChunk& c : w.step.chunks) {
    engine::Request* r = c.request;
    r->num_computed_tokens += c.num_tokens;
    tokens_computed_ += c.num_tokens;
    w.kv.CommitFullBlocks(*r);
    if (r->num_computed_tokens < r->num_tokens()) continue;  // a prefill chunk
    const size_t i = r->id().value() - 1;
    w.pending.Computed(*r);
    r->tokens.push_back(w_.requests[i].answer[static_cast<size_t>(r->num_output_tokens())]);
    const bool handing_off = r->params.prefill_only && r->num_output_tokens() < r->params.stopping.max_tokens;
    if (handing_off && !o_.split_stream_first_token) {
      live_[i].held_at = now_;  // the router holds it for the decode worker's first
    } else {
      OnToken(i);
    }
    if (r->num_output_tokens() >= r->params.stopping.max_tokens) {
      Finish(w, i);
    } else if (r->params.prefill_only) {
      HandOff(w, i);  // the engine's kHandoff: the first token, and the prompt leased
    }
  }
  NoteRunning(w);
  Report(w);
  StartStep(worker);
}

void Simulation::Release(SimWorker& w, size_t i) {
  engine::Request& r = *live_[i].request;
  w.scheduler.Remove(&r);
  w.pending.Remove(r);
  placement_->Settle(live_[i].decision);
}

void Simulation::Finish(SimWorker& w, size_t i) {
  LiveRequest& l = live_[i];
  engine::Request& r = *l.request;
  prompt_tokens_ += r.num_prompt_tokens();
  // Pulled blocks the admission's prefix hit still found: the rest were
  // evicted between the commit and the admission (or by the commit
  // itself, when the pull was larger than the free blocks).
  const size_t hit_blocks = static_cast<size_t>(std::max(0, r.cached_prompt_tokens) / o_.cluster.block_size);
  for (size_t k : l.pulling) pulled_blocks_hit_ += k < hit_blocks ? 1 : 0;
  l.pulling = {};
  // A decode half's hit is its pull; the client's figure is the prefill half's (counted at the handoff).
  if (l.phase != Phase::kDecode) cached_tokens_ += std::max(0, r.cached_prompt_tokens);
  served_tokens_ += r.num_prompt_tokens() + r.num_output_tokens();
  Release(w, i);
  ScoreRequest(i);
  last_finish_ = now_;
  ++finished_;
  l.request.reset();
}

}  // namespace detail

absl::StatusOr<SimResult> Simulate(const Workload& workload, const SimOptions& options) {
  detail::Simulation sim(workload, options);
  return sim.Run();
}

}  // namespace kvfleet::bench::placement_sim
