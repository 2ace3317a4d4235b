#include "services/router/server/route_selector.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "services/transport/wire/load_report_convert.h"

namespace kvfleet::router {

RouteSelector::RouteSelector(WorkerPool& pool, Placement& placement, std::shared_ptr<grpc::Channel> cachemanager,
                             RouterMetrics& metrics, RouteSelectorOptions options)
    : pool_(pool),
      placement_(placement),
      cachemanager_channel_(std::move(cachemanager)),
      cachemanager_(cachemanager_channel_ ? v1::CacheManager::NewStub(cachemanager_channel_) : nullptr),
      metrics_(metrics),
      options_(options) {}

std::optional<v1::FindOverlapsResponse> RouteSelector::FindOverlaps(const std::string& model_id,
                                                                    const std::vector<BlockHash>& hashes) {
  if (cachemanager_ == nullptr) return std::nullopt;
  // A channel already known to be failing would fail the call anyway; not
  // asking saves the round trip on every request while it is down (the
  // state check also starts a reconnection).
  if (cachemanager_channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return std::nullopt;
  }
  v1::FindOverlapsRequest request;
  request.set_model_id(model_id);
  for (const BlockHash& h : hashes) request.add_block_hashes(h.ToBytes());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.overlap_timeout);
  v1::FindOverlapsResponse response;
  if (grpc::Status s = cachemanager_->FindOverlaps(&ctx, request, &response); !s.ok()) {
    KVFLEET_LOG_DEBUG("FindOverlaps failed ({}): placing least_loaded", s.error_message());
    return std::nullopt;
  }
  return response;
}

uint64_t RouteSelector::AdmittedTicketOf(
    const google::protobuf::RepeatedPtrField<v1::PlacementTicket>& admitted) const {
  for (const v1::PlacementTicket& t : admitted) {
    if (t.router() == placement_.router_instance()) return t.ticket();
  }
  return 0;
}

void PromptBlocks::HashWith(int32_t pool_block_size) {
  if (pool_block_size <= 0 || pool_block_size == block_size) return;
  block_size = pool_block_size;
  hashes = HashFullBlocks(root, prompt, block_size);
}

std::vector<WorkerCandidate> RouteSelector::Candidates(const std::vector<PooledWorker>& workers,
                                                       const std::optional<v1::FindOverlapsResponse>& overlaps) const {
  absl::flat_hash_map<std::string, const v1::WorkerOverlap*> by_id;
  if (overlaps.has_value()) {
    for (const v1::WorkerOverlap& o : overlaps->workers()) by_id[o.worker_id()] = &o;
  }
  std::vector<WorkerCandidate> candidates;
  candidates.reserve(workers.size());
  for (const PooledWorker& w : workers) {
    WorkerCandidate c{.worker_id = w.worker_id,
                      .endpoint = w.endpoint,
                      .load = transport::FromProto(w.stats.load_report()),
                      .max_num_seqs = w.max_num_seqs,
                      .admitted_ticket = AdmittedTicketOf(w.stats.load_report().admitted()),
                      .kv_transfer_endpoint = w.kv_transfer_endpoint};
    c.load.draining = c.load.draining || w.draining;
    if (auto it = by_id.find(w.worker_id); it != by_id.end()) {
      const v1::WorkerOverlap& o = *it->second;
      c.matched_blocks = o.matched_blocks();
      c.host_blocks = o.host_blocks();
      c.disk_blocks = o.disk_blocks();
      // The cachemanager's report is fresher (every 50 ms) than our probe.
      // The ticket goes with the report the figures come from: a newer
      // probe's would drop decisions these figures do not count yet.
      if (o.load().blocks_total() > 0) {
        c.load = transport::FromProto(o.load());
        c.load.draining = c.load.draining || w.draining;
        c.admitted_ticket = AdmittedTicketOf(o.load().admitted());
      }
    }
    candidates.push_back(std::move(c));
  }
  return candidates;
}

std::optional<Decision> RouteSelector::ChoosePrefillWorker(const PlacementRequest& request,
                                                           std::vector<WorkerCandidate> prefill,
                                                           const absl::flat_hash_set<std::string>& exclude) {
  // A prefill worker's own prefix and queue decide, as for any prompt; it
  // pulls from no one (what it lacks, it computes).
  for (WorkerCandidate& c : prefill) c.kv_transfer_endpoint.clear();
  absl::StatusOr<Decision> d = placement_.Choose(request, std::move(prefill), exclude);
  if (!d.ok()) return std::nullopt;
  return *std::move(d);
}

absl::StatusOr<Route> RouteSelector::Choose(const std::string& model_id, PromptBlocks& blocks,
                                            const absl::flat_hash_set<std::string>& exclude, const RouteAsk& ask) {
  std::vector<PooledWorker> workers = pool_.Routable(model_id);
  if (workers.empty()) {
    return absl::UnavailableError(absl::StrCat("no worker of model ", model_id,
                                               " is reachable; start one or check the cachemanager (kvfleet workers)"));
  }
  if (!ask.lora.empty()) {
    // Only workers with the adapter's weights: any other would compute other tokens.
    std::erase_if(workers, [&](const PooledWorker& w) {
      return std::none_of(
          w.stats.lora_adapters().begin(), w.stats.lora_adapters().end(),
          [&](const v1::LoraAdapterInfo& a) { return a.name() == ask.lora && a.digest() == ask.lora_digest; });
    });
    if (workers.empty()) {
      return absl::UnavailableError(absl::StrCat("no reachable worker of model ", model_id, " has LoRA adapter '",
                                                 ask.lora, "' loaded; load it with POST /v1/load_lora_adapter"));
    }
  }
  const std::string& numerics = ask.numerics;
  if (!numerics.empty()) {
    std::erase_if(workers, [&](const PooledWorker& w) { return w.numerics != numerics; });
    if (workers.empty()) {
      return absl::UnavailableError(
          absl::StrCat("no worker with numerics ", numerics, " is reachable to continue the stream token for token"));
    }
  }
  blocks.HashWith(pool_.block_size(model_id));
  // round_robin uses neither overlaps nor load: no lookup to pay for.
  const bool wants_overlaps = placement_.options().policy != Policy::kRoundRobin;
  const std::optional<v1::FindOverlapsResponse> overlaps =
      wants_overlaps ? FindOverlaps(model_id, blocks.hashes) : std::nullopt;
  std::vector<WorkerCandidate> decoders, prefillers;
  absl::flat_hash_map<std::string, const PooledWorker*> by_worker;
  {
    std::vector<WorkerCandidate> all = Candidates(workers, overlaps);
    if (!ask.lora.empty()) {
      // From the load the cachemanager answered with, fresher than the
      // worker's last probe when there is one.
      const std::string identity = ask.lora + "@" + ask.lora_digest;
      for (WorkerCandidate& c : all) {
        c.lora_resident =
            std::find(c.load.resident_lora.begin(), c.load.resident_lora.end(), identity) != c.load.resident_lora.end();
        c.lora_load_seconds = c.load.lora_slot_load_seconds;
      }
    }
    for (size_t i = 0; i < workers.size(); ++i) {
      by_worker[workers[i].worker_id] = &workers[i];
      (Decodes(workers[i].role) ? decoders : prefillers).push_back(std::move(all[i]));
    }
  }
  // Prefill workers alone still serve, whole requests and all.
  if (decoders.empty()) std::swap(decoders, prefillers);
  const bool any_prefill_worker = !prefillers.empty();
  PlacementRequest request{.block_hashes = blocks.hashes,
                           .prompt_tokens = static_cast<int32_t>(blocks.prompt.size()),
                           .block_size = std::max(blocks.block_size, 1),
                           .session_id = blocks.session_id,
                           .handoff_source = ask.handoff};
  // Without a cachemanager at all (static workers) the policy runs as
  // configured, its decision memory standing in for the index; only a
  // configured cachemanager that cannot be asked is a fallback.
  if (cachemanager_ != nullptr && wants_overlaps && !overlaps.has_value()) {
    request.policy = Policy::kLeastLoaded;
    metrics_.RecordCacheManagerFallback();
  }
  const bool prefill_worker_live = std::any_of(prefillers.begin(), prefillers.end(), [&](const WorkerCandidate& c) {
    return !c.load.draining && !exclude.contains(c.worker_id);
  });
  const bool may_split = ask.may_split && !ask.handoff.has_value() && any_prefill_worker;
  // The decoders stay known for the split's price (a few per model).
  std::vector<WorkerCandidate> decode_candidates;
  if (may_split) decode_candidates = decoders;
  absl::StatusOr<Decision> decision = placement_.Choose(request, std::move(decoders), exclude);
  if (!decision.ok() && !numerics.empty()) {
    return absl::Status(decision.status().code(),
                        absl::StrCat(decision.status().message(), " among the workers with numerics ", numerics,
                                     " (a stream continues token for token only on the same)"));
  }
  if (!decision.ok()) return decision.status();
  bool prefill_only = false;
  if (may_split) {
    const auto decode_worker =
        std::find_if(decode_candidates.begin(), decode_candidates.end(),
                     [&](const WorkerCandidate& c) { return c.worker_id == decision->worker_id; });
    SplitVerdict verdict =
        DecideSplit(options_.split, placement_.options(), request, *decision, *decode_worker, prefill_worker_live);
    if (verdict.split) {
      std::optional<Decision> prefill = ChoosePrefillWorker(request, std::move(prefillers), exclude);
      if (prefill.has_value()) {
        // The decode worker is chosen again at the handoff, when it pulls.
        placement_.Retract(*decision, blocks.hashes);
        decision = *std::move(prefill);
        prefill_only = true;
      } else {
        verdict = {.split = false, .reason = SplitReason::kNoPrefillWorker};
      }
    }
    metrics_.Model(model_id).RecordSplit(verdict);
  }
  Route route{.decision = *std::move(decision), .policy = request.policy.value_or(placement_.options().policy)};
  const PooledWorker& chosen = *by_worker.at(route.decision.worker_id);
  route.stub = chosen.stub;
  route.numerics = chosen.numerics;
  route.prefill_only = prefill_only;
  route.kv_transfer_endpoint = chosen.kv_transfer_endpoint;
  route.prefill_tokens_per_second = transport::FromProto(chosen.stats.load_report()).prefill_tokens_per_second;
  metrics_.Model(model_id).RecordDecision(route.policy, route.decision);
  if (spdlog::should_log(spdlog::level::debug)) {
    for (const CandidateScore& c : route.decision.scores) {
      KVFLEET_LOG_DEBUG(
          "placement {}: {} matched {} (reported {}, remembered {}), uncached prefill {:.1f}, decode "
          "load {:.1f}, kv penalty {:.1f}, cost {:.1f}, load {}{}{}",
          ReasonName(route.decision.reason), c.worker_id, c.matched_blocks, c.reported_blocks, c.remembered_blocks,
          c.uncached_prefill_blocks, c.decode_load_blocks, c.kv_penalty, c.cost, c.load,
          c.worker_id == route.decision.worker_id ? " <- chosen" : "", prefill_only ? " (prefill, split)" : "");
    }
  }
  return route;
}

}  // namespace kvfleet::router
