// The simulator's five workloads and the oracle bound (placement_sim.h).
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "bench/placement_sim.h"
#include "common/block_hash.h"

namespace kvfleet::bench::placement_sim {
namespace {

// Token ids 0-2 are special in the default model's vocabulary.
constexpr int32_t kFirstToken = 3;
constexpr int32_t kVocab = 49152;

std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int64_t n) {
  std::uniform_int_distribution<int32_t> token(kFirstToken, kVocab - 1);
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int32_t& t : out) t = token(rng);
  return out;
}

std::shared_ptr<const std::vector<int32_t>> Shared(std::vector<int32_t> tokens) {
  return std::make_shared<const std::vector<int32_t>>(std::move(tokens));
}

// Requests whose `prefix` picks one of `prefixes` by `pick`, each with its
// own question and answer, at unit-rate Poisson times (scaled later).
template <typename Pick>
std::vector<SimRequest> SharedContextTrace(const WorkloadOptions& o, std::mt19937_64& rng,
                                           const std::vector<std::shared_ptr<const std::vector<int32_t>>>& prefixes,
                                           Pick pick) {
  std::exponential_distribution<double> gap(1.0);
  std::vector<SimRequest> out;
  out.reserve(static_cast<size_t>(o.requests));
  double t = 0;
  for (int64_t i = 0; i < o.requests; ++i) {
    t += gap(rng);
    const int64_t g = pick(rng);
    out.push_back({.arrival_s = t,
                   .group = g,
                   .prefix = prefixes[static_cast<size_t>(g)],
                   .suffix = RandomTokens(rng, o.question_tokens),
                   .answer = RandomTokens(rng, o.output_tokens)});
  }
  return out;
}

double TokensOf(const std::vector<SimRequest>& requests) {
  double tokens = 0;
  for (const SimRequest& r : requests) tokens += static_cast<double>(r.prompt_tokens() + r.answer.size());
  return tokens;
}

// chat-docs: each request a chat turn or (doc_share of them) a document,
// nothing shared, at unit-rate Poisson times (scaled later).
std::vector<SimRequest> ChatDocsTrace(const WorkloadOptions& o, std::mt19937_64& rng) {
  std::exponential_distribution<double> gap(1.0);
  std::bernoulli_distribution doc(o.doc_share);
  auto between = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const auto empty = Shared({});
  std::vector<SimRequest> out;
  out.reserve(static_cast<size_t>(o.requests));
  double t = 0;
  for (int64_t i = 0; i < o.requests; ++i) {
    t += gap(rng);
    const bool is_doc = doc(rng);
    const int64_t prompt = is_doc ? o.doc_tokens : between(o.chat_prompt_min, o.chat_prompt_max);
    const int64_t output =
        is_doc ? between(o.doc_output_min, o.doc_output_max) : between(o.chat_output_min, o.chat_output_max);
    out.push_back(
        {.arrival_s = t, .prefix = empty, .suffix = RandomTokens(rng, prompt), .answer = RandomTokens(rng, output)});
  }
  return out;
}

}  // namespace

std::vector<int32_t> SimRequest::Prompt() const {
  std::vector<int32_t> p(prefix->begin(), prefix->end());
  p.insert(p.end(), suffix.begin(), suffix.end());
  return p;
}

absl::StatusOr<WorkloadKind> ParseWorkload(const std::string& name) {
  if (name == "multi-tenant") return WorkloadKind::kMultiTenant;
  if (name == "multi-turn") return WorkloadKind::kMultiTurn;
  if (name == "hot-prefix") return WorkloadKind::kHotPrefix;
  if (name == "no-sharing") return WorkloadKind::kNoSharing;
  if (name == "chat-docs") return WorkloadKind::kChatDocs;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name, "': multi-tenant, multi-turn, hot-prefix, no-sharing or chat-docs"));
}

std::string WorkloadName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kMultiTenant:
      return "multi-tenant";
    case WorkloadKind::kMultiTurn:
      return "multi-turn";
    case WorkloadKind::kHotPrefix:
      return "hot-prefix";
    case WorkloadKind::kNoSharing:
      return "no-sharing";
    case WorkloadKind::kChatDocs:
      return "chat-docs";
  }
  return "unknown";
}

// Each group's requests under adapter group mod adapters: requests that
// share a prefix share their adapter, as a tenant's fine-tune would.
static void AssignAdapters(Workload& w) {
  if (w.options.adapters <= 0) return;
  for (SimRequest& r : w.requests) r.adapter = r.group >= 0 ? r.group % w.options.adapters : -1;
}

Workload BuildWorkload(const WorkloadOptions& o, double load, const ClusterShape& cluster) {
  std::mt19937_64 rng(o.seed);
  Workload w{.options = o, .load = load};
  const double cluster_peak = cluster.workers * cluster.PeakTokensPerSecond();
  switch (o.kind) {
    case WorkloadKind::kMultiTenant:
    case WorkloadKind::kHotPrefix: {
      std::vector<std::shared_ptr<const std::vector<int32_t>>> contexts;
      for (int64_t t = 0; t < o.tenants; ++t) contexts.push_back(Shared(RandomTokens(rng, o.context_tokens)));
      if (o.kind == WorkloadKind::kMultiTenant) {
        std::uniform_int_distribution<int64_t> tenant(0, o.tenants - 1);
        w.requests = SharedContextTrace(o, rng, contexts, [&](std::mt19937_64& r) { return tenant(r); });
      } else {
        std::vector<double> weights;
        for (int64_t k = 1; k <= o.tenants; ++k) weights.push_back(1.0 / std::pow(static_cast<double>(k), o.zipf));
        std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
        w.requests = SharedContextTrace(o, rng, contexts, [&](std::mt19937_64& r) { return zipf(r); });
      }
      break;
    }
    case WorkloadKind::kNoSharing: {
      std::exponential_distribution<double> gap(1.0);
      double t = 0;
      for (int64_t i = 0; i < o.requests; ++i) {
        t += gap(rng);
        w.requests.push_back({.arrival_s = t,
                              .prefix = Shared(RandomTokens(rng, o.context_tokens)),
                              .suffix = RandomTokens(rng, o.question_tokens),
                              .answer = RandomTokens(rng, o.output_tokens)});
      }
      break;
    }
    case WorkloadKind::kChatDocs: {
      // Requests arrive at `load` × the workers' time (RequestSeconds).
      w.requests = ChatDocsTrace(o, rng);
      double seconds = 0, tokens = 0;
      for (const SimRequest& r : w.requests) {
        const auto answer = static_cast<int64_t>(r.answer.size());
        seconds += cluster.RequestSeconds(r.prompt_tokens(), answer);
        tokens += static_cast<double>(r.prompt_tokens() + answer);
      }
      const double n = static_cast<double>(std::max<size_t>(w.requests.size(), 1));
      const double request_rate = load * cluster.workers / (seconds / n);
      for (SimRequest& r : w.requests) r.arrival_s /= request_rate;
      w.offered_rate = request_rate * tokens / n;
      return w;
    }
    case WorkloadKind::kMultiTurn: {
      // One system prompt for everyone, then each conversation's turns.
      const auto system = Shared(RandomTokens(rng, 200));
      const int64_t sessions = std::max<int64_t>(1, (o.requests + o.turns - 1) / o.turns);
      for (int64_t s = 0; s < sessions; ++s) {
        std::shared_ptr<const std::vector<int32_t>> history = system;
        for (int64_t k = 0; k < o.turns && static_cast<int64_t>(w.requests.size()) < o.requests; ++k) {
          SimRequest r{.arrival_s = static_cast<double>(k),  // the turn index until the times are known
                       .group = s,
                       .session_id = absl::StrCat("session-", s),
                       .prefix = history,
                       .suffix = RandomTokens(rng, o.question_tokens),
                       .answer = RandomTokens(rng, o.output_tokens)};
          std::vector<int32_t> next = r.Prompt();
          next.insert(next.end(), r.answer.begin(), r.answer.end());
          history = Shared(std::move(next));
          w.requests.push_back(std::move(r));
        }
      }
      // Sessions start as a Poisson process sized so the offered token rate
      // is `load` × peak; turn k follows k × think_seconds later.
      const double tokens_per_session = TokensOf(w.requests) / static_cast<double>(sessions);
      std::exponential_distribution<double> start_gap(load * cluster_peak / tokens_per_session);
      double start = 0;
      int64_t last_group = -1;
      for (SimRequest& r : w.requests) {
        if (r.group != last_group) {
          start += start_gap(rng);
          last_group = r.group;
        }
        r.arrival_s = start + r.arrival_s * o.think_seconds;
      }
      std::stable_sort(w.requests.begin(), w.requests.end(),
                       [](const SimRequest& a, const SimRequest& b) { return a.arrival_s < b.arrival_s; });
      w.offered_rate = load * cluster_peak;
      AssignAdapters(w);
      return w;
    }
  }
  // Scale the unit-rate arrivals to the offered load.
  const double mean_tokens = TokensOf(w.requests) / static_cast<double>(std::max<size_t>(w.requests.size(), 1));
  const double request_rate = load * cluster_peak / mean_tokens;
  for (SimRequest& r : w.requests) r.arrival_s /= request_rate;
  w.offered_rate = load * cluster_peak;
  AssignAdapters(w);
  return w;
}

OracleHitRatios OracleHitRatio(const Workload& workload, const ClusterShape& cluster) {
  const int32_t bs = cluster.block_size;
  const BlockHash root = RootBlockHash("sim", "");
  // Every reuse the trace offers: a request's leading full blocks that an
  // earlier request computed (the sequence it left behind: prompt and
  // answer), with how long ago those blocks were last written or read.
  struct Reuse {
    double gap_s;
    double tokens;
  };
  std::vector<Reuse> reuses;
  absl::flat_hash_map<BlockHash, double> last_touched;
  double prompt_tokens = 0, reusable = 0;
  for (const SimRequest& r : workload.requests) {
    std::vector<int32_t> sequence = r.Prompt();
    prompt_tokens += static_cast<double>(sequence.size());
    const std::vector<BlockHash> prompt_hashes = HashFullBlocks(root, sequence, bs);
    size_t hit = 0;
    double since = r.arrival_s;
    while (hit < prompt_hashes.size()) {
      auto it = last_touched.find(prompt_hashes[hit]);
      if (it == last_touched.end()) break;
      since = std::min(since, it->second);
      ++hit;
    }
    // The engine computes at least the prompt's last token.
    if (hit > 0 && hit * bs == sequence.size()) --hit;
    if (hit > 0) {
      reuses.push_back({.gap_s = r.arrival_s - since, .tokens = static_cast<double>(hit * bs)});
      reusable += static_cast<double>(hit * bs);
    }
    sequence.insert(sequence.end(), r.answer.begin(), r.answer.end());
    for (const BlockHash& h : HashFullBlocks(root, sequence, bs)) last_touched[h] = r.arrival_s;
  }
  OracleHitRatios out;
  if (prompt_tokens == 0) return out;
  out.bound = reusable / prompt_tokens;
  // The estimate: keeping T tokens cached across a gap of g seconds costs
  // T·g of the cluster's workers × kv_tokens × span token-seconds; the
  // shortest gaps are taken first. Not a bound: blocks a running request
  // pins cost nothing extra, and queueing changes the gaps.
  const double span = workload.requests.back().arrival_s - workload.requests.front().arrival_s;
  double budget = static_cast<double>(cluster.workers) * static_cast<double>(cluster.kv_tokens) * std::max(span, 1e-9);
  std::sort(reuses.begin(), reuses.end(), [](const Reuse& a, const Reuse& b) { return a.gap_s < b.gap_s; });
  double kept = 0;
  for (const Reuse& u : reuses) {
    const double cost = u.tokens * u.gap_s;
    if (cost <= budget) {
      kept += u.tokens;
      budget -= cost;
    } else {
      kept += u.tokens * budget / cost;
      break;
    }
  }
  out.capacity_estimate = kept / prompt_tokens;
  return out;
}

}  // namespace kvfleet::bench::placement_sim
