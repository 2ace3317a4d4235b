// Disaggregated prefill and decode in the simulator (placement_sim.h,
// SimOptions::prefill_workers): the router's split as route_selector.cc
// makes it, the prefill worker's handoff and lease, and the decode half's
// placement with the prefill worker as its pull source.
#include <algorithm>
#include <memory>
#include <utility>

#include "bench/placement_sim_cluster.h"
#include "services/router/placement/split_policy.h"

namespace kvfleet::bench::placement_sim::detail {

// As RouteSelector::Choose: placement among the decode workers first; if
// DecideSplit says split, that decision is retracted and the prompt goes to
// the prefill worker placement prefers among the prefill workers (which
// pull from no one: their transfer addresses are left out), marked
// prefill_only with a lease named after the request.
absl::Status Simulation::RouteWithRoles(size_t i, std::unique_ptr<engine::Request> request,
                                        const router::PlacementRequest& pr,
                                        const std::vector<cachemanager::WorkerOverlapInfo>& matched) {
  std::vector<router::WorkerCandidate> decoders = Candidates(request->lora_identity, decoders_, matched);
  const std::vector<router::WorkerCandidate> decode_candidates = decoders;  // for the split's price
  absl::StatusOr<router::Decision> decode = placement_->Choose(pr, std::move(decoders));
  if (!decode.ok()) return decode.status();
  const auto decode_worker =
      std::find_if(decode_candidates.begin(), decode_candidates.end(),
                   [&](const router::WorkerCandidate& c) { return c.worker_id == decode->worker_id; });
  // Every simulated worker is live and none is excluded: a prefill worker is.
  const router::SplitVerdict verdict =
      router::DecideSplit(o_.split, placement_->options(), pr, *decode, *decode_worker, /*prefill_worker_live=*/true);
  if (verdict.reason == router::SplitReason::kPullPricedOut) ++splits_priced_out_;
  if (!verdict.split) {
    Dispatch(i, std::move(request), *std::move(decode), Phase::kWhole);
    return absl::OkStatus();
  }
  std::vector<router::WorkerCandidate> prefillers = Candidates(request->lora_identity, prefillers_, matched);
  for (router::WorkerCandidate& c : prefillers) c.kv_transfer_endpoint.clear();
  absl::StatusOr<router::Decision> prefill = placement_->Choose(pr, std::move(prefillers));
  if (!prefill.ok()) return prefill.status();
  // The decode worker is chosen again at the handoff, when it pulls.
  placement_->Retract(*decode, pr.block_hashes);
  request->params.prefill_only = true;
  request->params.kv_lease_id = LeaseId(i);
  ++splits_;
  Dispatch(i, std::move(request), *std::move(prefill), Phase::kPrefill);
  return absl::OkStatus();
}

// The engine's kHandoff finish: the first token is out; the prompt's
// cached blocks go under the request's lease (HoldForHandoff, before the
// request lets go of them) until a decode worker's pull names it or the
// deadline passes. The handoff reaches the router router_ms later.
void Simulation::HandOff(SimWorker& w, size_t i) {
  LiveRequest& l = live_[i];
  engine::Request& r = *l.request;
  const size_t worker = WorkerIndex(w.id);
  if (w.leases.Hold(r.params.kv_lease_id, w.kv.PagesOfHit(r.prompt_block_hashes), At(now_ + o_.lease_seconds)) > 0) {
    Push(now_ + o_.lease_seconds, EventKind::kLeaseExpiry, 0, worker);
  }
  // The client's cached figure is the prefill half's (as the router keeps it).
  cached_tokens_ += std::max(0, r.cached_prompt_tokens);
  Release(w, i);
  l.prefill_worker = worker;
  l.request.reset();
  Push(now_ + o_.router_ms / 1000, EventKind::kHandoff, i, worker);
}

// The decode half: the prompt plus the first token (resumed output, as the
// router sends it), placed among the decode workers with the prefill worker
// as handoff_source; placement prices and sizes the pull, and a pull from
// the prefill worker names its lease.
absl::Status Simulation::RouteDecodeHalf(size_t i) {
  LiveRequest& l = live_[i];
  std::unique_ptr<engine::Request> request = NewRequest(i, Phase::kDecode);
  ApplyVisibleEvents();
  router::PlacementRequest pr = PlacementRequestFor(i, *request);
  const SimWorker& prefill = *workers_[l.prefill_worker];
  pr.handoff_source = router::HandoffSource{.worker_id = prefill.id,
                                            .endpoint = TransferEndpoint(prefill.id),
                                            .blocks = static_cast<int32_t>(pr.block_hashes.size()),
                                            .prefill_tokens_per_second = o_.cluster.PeakTokensPerSecond()};
  absl::StatusOr<router::Decision> d =
      placement_->Choose(pr, Candidates(request->lora_identity, decoders_, Overlaps(pr.block_hashes)));
  if (!d.ok()) return d.status();
  const bool from_prefill = d->peer_pull.has_value() && d->peer_pull->worker_id == prefill.id;
  Dispatch(i, std::move(request), *std::move(d), Phase::kDecode);
  if (from_prefill) live_[i].request->params.kv_peer->lease_id = LeaseId(i);
  return absl::OkStatus();
}

void Simulation::ExpireLeases(size_t worker) {
  SimWorker& w = *workers_[worker];
  if (w.leases.Expire(At(now_)) == 0) return;
  Report(w);
  if (!w.busy) StartStep(worker);  // the freed blocks may admit a waiting request
}

}  // namespace kvfleet::bench::placement_sim::detail
