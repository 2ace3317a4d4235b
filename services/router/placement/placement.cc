#include "services/router/placement/placement.h"

#include <algorithm>
#include <limits>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "services/router/placement/cost_model.h"

namespace kvfleet::router {
namespace {

absl::Status ValidateRequest(const PlacementRequest& r) {
  if (r.block_size < 1) return absl::InvalidArgumentError(absl::StrCat("block_size must be >= 1, got ", r.block_size));
  if (r.prompt_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("prompt_tokens must be >= 0, got ", r.prompt_tokens));
  }
  const int64_t full_blocks = r.prompt_tokens / r.block_size;
  if (static_cast<int64_t>(r.block_hashes.size()) > full_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(r.block_hashes.size(), " block hashes for a prompt of ",
                                                   r.prompt_tokens, " tokens, which has only ", full_blocks,
                                                   " full blocks of ", r.block_size, " tokens"));
  }
  return absl::OkStatus();
}

// The candidates that may be chosen, sorted by worker id.
absl::StatusOr<std::vector<WorkerCandidate>> Eligible(std::vector<WorkerCandidate> candidates,
                                                      const absl::flat_hash_set<std::string>& exclude) {
  std::sort(candidates.begin(), candidates.end(),
            [](const WorkerCandidate& a, const WorkerCandidate& b) { return a.worker_id < b.worker_id; });
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& id = candidates[i].worker_id;
    if (id.empty()) return absl::InvalidArgumentError("a worker candidate has an empty worker_id");
    if (i > 0 && id == candidates[i - 1].worker_id) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", id, " is listed twice among the candidates"));
    }
  }
  const size_t live = candidates.size();
  size_t draining = 0, excluded = 0;
  std::vector<WorkerCandidate> eligible;
  eligible.reserve(candidates.size());
  for (WorkerCandidate& c : candidates) {
    if (c.load.draining) {
      ++draining;
    } else if (exclude.contains(c.worker_id)) {
      ++excluded;
    } else {
      eligible.push_back(std::move(c));
    }
  }
  if (live == 0) return absl::UnavailableError("no live workers to place the request on");
  if (eligible.empty()) {
    return absl::UnavailableError(absl::StrCat("no worker can take the request: ", live, " live, ", draining,
                                               " draining, ", excluded, " already tried for it"));
  }
  return eligible;
}

auto CostKey(const CandidateScore& s) { return std::tie(s.cost, s.load, s.used_blocks); }
auto LoadKey(const CandidateScore& s) { return std::tie(s.load, s.used_blocks); }

// The index in `scores` of the smallest key among those `in` admits; npos if
// none. Exact ties go to the first in worker-id order starting at
// `rotation`: a new rotation each decision spreads ties round the cluster
// (by worker id, a cold burst on an idle cluster would all go to one worker
// until its reports caught up).
template <typename Key, typename Pred>
size_t ArgMin(const std::vector<CandidateScore>& scores, Key key, Pred in, size_t rotation) {
  size_t best = std::string::npos;
  const size_t n = scores.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (rotation + k) % n;
    if (!in(scores[i])) continue;
    if (best == std::string::npos || key(scores[i]) < key(scores[best])) best = i;
  }
  return best;
}

// Stable across processes (absl::Hash is seeded per process): every router
// replica must pick the same home for a session.
uint64_t RendezvousWeight(std::string_view session_id, std::string_view worker_id) {
  uint64_t h = 0xcbf29ce484222325;  // FNV-1a
  auto mix = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3;
    }
  };
  mix(session_id);
  mix(std::string_view("\0", 1));
  mix(worker_id);
  // splitmix64's finalizer: FNV alone leaves the high bits poorly mixed.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9;
  h ^= h >> 27;
  h *= 0x94d049bb133111eb;
  h ^= h >> 31;
  return h;
}

// The eligible worker with a transfer address that holds the most of the
// prompt's leading blocks per the cachemanager (remembered blocks may not be
// computed yet, so they are never pulled); fewer on disk breaks a tie.
std::optional<size_t> FindPeerSource(const std::vector<WorkerCandidate>& live, int32_t hashes) {
  std::optional<size_t> best;
  for (size_t i = 0; i < live.size(); ++i) {
    const WorkerCandidate& c = live[i];
    const int32_t held = std::clamp(c.matched_blocks, 0, hashes);
    if (c.kv_transfer_endpoint.empty() || held == 0) continue;
    if (!best.has_value()) {
      best = i;
      continue;
    }
    const WorkerCandidate& b = live[*best];
    const int32_t best_held = std::clamp(b.matched_blocks, 0, hashes);
    if (held > best_held || (held == best_held && c.disk_blocks < b.disk_blocks)) best = i;
  }
  return best;
}

uint64_t RandomInstance() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) | rd();
  return id;
}

}  // namespace

Placement::Placement(PlacementOptions options, NowFn now)
    : options_(std::move(options)),
      now_(std::move(now)),
      router_instance_(options_.router_instance != 0 ? options_.router_instance : RandomInstance()),
      memory_({.prefix_ttl = options_.decision_memory,
               .max_blocks = options_.memory_max_blocks,
               .in_flight_ttl = options_.in_flight_window,
               .max_in_flight = options_.max_in_flight}) {
  CHECK(options_.Validate().ok()) << options_.Validate();
  CHECK(now_ != nullptr);
}

size_t Placement::ChooseLeastLoaded(const std::vector<CandidateScore>& scores, size_t rotation) {
  return ArgMin(
      scores, LoadKey, [](const CandidateScore&) { return true; }, rotation);
}

size_t Placement::ChoosePrefixAware(const PlacementRequest& request, std::vector<CandidateScore>& scores,
                                    Reason& reason, size_t rotation, std::optional<size_t> source) const {
  // Workers that cannot hold the request's new blocks only if none can.
  const bool any_fits = std::any_of(scores.begin(), scores.end(), [](const CandidateScore& s) { return s.fits; });
  auto in_tier = [any_fits](const CandidateScore& s) { return s.fits || !any_fits; };
  const size_t best = ArgMin(scores, CostKey, in_tier, rotation);
  const CandidateScore& b = scores[best];
  // The guard applies to a hit (and to a session's home): a cold choice is
  // already the cheapest by load.
  if (options_.affinity_guard && (b.matched_blocks > 0 || b.peer_blocks > 0 || !request.session_id.empty())) {
    MarkOverGuard(scores, in_tier);
  }
  if (!request.session_id.empty()) {
    // The session's home, unless measured overlap says another worker
    // holds more of the conversation (a turn went elsewhere while the home
    // was busy) or the home is overloaded or full.
    const size_t home = SessionHome(request.session_id, scores, in_tier);
    const CandidateScore& h = scores[home];
    if (home != best && h.fits && !h.over_guard && h.matched_blocks >= b.matched_blocks) {
      reason = Reason::kSession;
      return home;
    }
  }
  if (options_.affinity_guard && b.matched_blocks > 0 && b.over_guard) {
    reason = Reason::kAffinityGuard;
    const size_t alt = ArgMin(
        scores, CostKey, [&](const CandidateScore& s) { return in_tier(s) && !s.over_guard; }, rotation);
    return alt != std::string::npos ? alt : ArgMin(scores, LoadKey, in_tier, rotation);
  }
  if (b.peer_blocks > 0 && source.has_value()) {
    // A pull should replace a recompute, not a hit: the cost's load terms
    // are weights, not seconds, and the copy takes the puller's memory from
    // other prefixes. So when only the pull's discount makes the puller
    // cheaper than the source, the source keeps the request unless it is
    // over the guard, cannot fit it, or would start it later than the
    // puller (its queue against the pull). KV pressure alone does not move
    // it: a hit there adds the request's few new blocks, the pull all of
    // them. A puller that would have won computing the prefix pulls it.
    const CandidateScore& s = scores[*source];
    const bool source_won_without_pulls = CostKey(s) < std::tie(b.cost_computing, b.load, b.used_blocks);
    if (source_won_without_pulls && in_tier(s) && s.fits && !s.over_guard &&
        s.uncached_prefill_blocks <= b.uncached_prefill_blocks) {
      reason = Reason::kPrefixHit;
      return *source;
    }
  }
  if (b.matched_blocks == 0) {
    reason = Reason::kCold;
  } else {
    reason = b.remembered_blocks > b.reported_blocks ? Reason::kRecentDecision : Reason::kPrefixHit;
  }
  return best;
}

template <typename Pred>
void Placement::MarkOverGuard(std::vector<CandidateScore>& scores, Pred in_tier) const {
  int32_t min_load = std::numeric_limits<int32_t>::max();
  bool any_room = false;
  for (const CandidateScore& s : scores) {
    if (!in_tier(s)) continue;
    min_load = std::min(min_load, s.load);
    any_room = any_room || !s.saturated;
  }
  for (CandidateScore& s : scores) {
    if (!in_tier(s)) continue;
    const bool imbalanced = s.load - min_load > options_.affinity_guard_margin &&
                            s.load > options_.affinity_guard_ratio * static_cast<double>(min_load);
    s.over_guard = imbalanced || (s.saturated && any_room);
  }
}

template <typename Pred>
size_t Placement::SessionHome(const std::string& session_id, const std::vector<CandidateScore>& scores, Pred in_tier) {
  size_t home = 0;
  uint64_t top = 0;
  bool any = false;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!in_tier(scores[i])) continue;
    const uint64_t weight = RendezvousWeight(session_id, scores[i].worker_id);
    if (!any || weight > top) {
      home = i;
      top = weight;
      any = true;
    }
  }
  return home;
}

absl::StatusOr<Decision> Placement::Choose(const PlacementRequest& request, std::vector<WorkerCandidate> candidates,
                                           const absl::flat_hash_set<std::string>& exclude) {
  RETURN_IF_ERROR(ValidateRequest(request));
  ASSIGN_OR_RETURN(std::vector<WorkerCandidate> live, Eligible(std::move(candidates), exclude));
  const Policy policy = request.policy.value_or(options_.policy);
  std::vector<std::string> ids;
  ids.reserve(live.size());
  for (const WorkerCandidate& c : live) ids.push_back(c.worker_id);

  absl::MutexLock lock(&mu_);
  const Clock::time_point now = now_();
  memory_.Expire(now);
  for (const WorkerCandidate& c : live) memory_.Acknowledge(c.worker_id, c.admitted_ticket);
  const size_t rotation = static_cast<size_t>(tie_rotation_++ % live.size());
  std::vector<int32_t> remembered(live.size(), 0);
  if (policy == Policy::kPrefixAware) remembered = memory_.RememberedBlocks(request.block_hashes, ids, now);
  std::optional<size_t> source_index;  // the source among the candidates
  PeerSource source;
  std::string source_endpoint;
  bool has_source = false;
  if (request.handoff_source.has_value() && options_.peer_pull) {
    const HandoffSource& h = *request.handoff_source;
    source = {.worker_id = h.worker_id,
              .blocks = h.blocks,
              .prefill_tokens_per_second = h.prefill_tokens_per_second,
              .handoff = true};
    source_endpoint = h.endpoint;
    has_source = true;
  } else if (policy == Policy::kPrefixAware && options_.peer_pull) {
    source_index = FindPeerSource(live, static_cast<int32_t>(request.block_hashes.size()));
    if (source_index.has_value()) {
      const WorkerCandidate& s = live[*source_index];
      source = {.worker_id = s.worker_id,
                .blocks = s.matched_blocks,
                .prefill_tokens_per_second = s.load.prefill_tokens_per_second};
      source_endpoint = s.kv_transfer_endpoint;
      has_source = true;
    }
  }
  std::vector<CandidateScore> scores;
  scores.reserve(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    scores.push_back(ScoreCandidate(options_, request, live[i], remembered[i], memory_.InFlightLoad(ids[i]),
                                    has_source ? &source : nullptr));
  }

  size_t chosen = 0;
  Reason reason = Reason::kCold;
  switch (policy) {
    case Policy::kPrefixAware:
      chosen = ChoosePrefixAware(request, scores, reason, rotation, source_index);
      break;
    case Policy::kLeastLoaded:
      chosen = ChooseLeastLoaded(scores, rotation);
      reason = Reason::kLeastLoaded;
      break;
    case Policy::kRoundRobin:
      chosen = static_cast<size_t>(round_robin_next_++ % live.size());
      reason = Reason::kRoundRobin;
      break;
  }
  const CandidateScore& s = scores[chosen];
  const Clock::duration remember = PrefixMemoryFor(request, live[chosen], s);
  const uint64_t ticket = memory_.Record(s.worker_id, request.block_hashes, s.new_blocks, now, remember);

  Decision d;
  d.in_flight_ticket = ticket;
  d.router_instance = router_instance_;
  d.worker_id = s.worker_id;
  d.endpoint = std::move(live[chosen].endpoint);
  d.reason = reason;
  d.matched_blocks = s.matched_blocks;
  d.prefix_match_ratio =
      request.prompt_tokens > 0
          ? std::min(1.0, static_cast<double>(int64_t{s.matched_blocks} * request.block_size) / request.prompt_tokens)
          : 0.0;
  d.fits = s.fits;
  if (s.peer_blocks > 0) {
    d.peer_pull = PeerPull{
        .worker_id = source.worker_id, .endpoint = source_endpoint, .blocks = s.matched_blocks + s.peer_blocks};
    if (reason == Reason::kCold || reason == Reason::kPrefixHit || reason == Reason::kRecentDecision) {
      d.reason = Reason::kPeerPull;
    }
  } else {
    d.pull_declined = s.pull_priced_out;
  }
  d.scores = std::move(scores);
  return d;
}

void Placement::Settle(const Decision& decision) {
  absl::MutexLock lock(&mu_);
  memory_.Settle(decision.in_flight_ticket);
}

Placement::Clock::duration Placement::PrefixMemoryFor(const PlacementRequest& request, const WorkerCandidate& chosen,
                                                      const CandidateScore& score) const {
  if (options_.decision_memory <= std::chrono::milliseconds::zero()) return Clock::duration::zero();
  if (!(chosen.load.prefill_tokens_per_second > 0.0)) return options_.decision_memory;
  // Everything the worker has to prefill before this prompt's blocks are
  // all computed and published: its own uncached tokens and the queue's.
  const double tokens = score.uncached_prefill_blocks * request.block_size;
  const double seconds = options_.decision_memory_prefill_factor * tokens / chosen.load.prefill_tokens_per_second;
  const auto predicted = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(seconds, 1e7)));  // no overflow on a silly rate
  return std::clamp<Clock::duration>(options_.decision_memory_min + predicted, options_.decision_memory_min,
                                     options_.decision_memory_max);
}

void Placement::Retract(const Decision& decision, std::span<const BlockHash> block_hashes) {
  absl::MutexLock lock(&mu_);
  memory_.Retract(decision.worker_id, block_hashes, decision.in_flight_ticket);
}

void Placement::Forget(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  memory_.Forget(worker_id);
}

int64_t Placement::remembered_blocks() const {
  absl::MutexLock lock(&mu_);
  return memory_.remembered_blocks();
}

int64_t Placement::in_flight() const {
  absl::MutexLock lock(&mu_);
  return memory_.in_flight();
}

}  // namespace kvfleet::router
