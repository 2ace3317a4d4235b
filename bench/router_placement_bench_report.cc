// router_placement_bench's figures: the router's and the workers' /metrics
// (scraped before and after a phase, subtracted, histogram quantiles), one
// phase's summary, the table and the JSON. See router_placement_bench.h.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/router_placement_bench.h"
#include "common/status_macros.h"
#include "tests/testing/http_get.h"
#include "tests/testing/prometheus_text.h"
#include "tools/load/latency_stats.h"

namespace kvfleet::bench::router_placement {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::Duration kScrapeTimeout = absl::Seconds(5);

// ---------------------------------------------------------------------------
// Metrics, scraped before and after a phase: the router's own, and the
// workers' engine steps (how much they computed, and how long a step took).

// Adds the samples of histogram `name` (every label set) into `h`.
void AddHistogram(const testing::PrometheusScrape& scrape, const std::string& name, Histogram& h) {
  std::map<double, double> buckets;
  for (const auto& [le, n] : h.buckets) buckets[le] += n;
  for (const testing::Sample& s : scrape.samples()) {
    if (s.name == name + "_sum") h.sum += s.value;
    if (s.name != name + "_bucket" || s.labels.count("le") == 0) continue;
    double le = INFINITY;
    if (s.labels.at("le") != "+Inf" && !absl::SimpleAtod(s.labels.at("le"), &le)) continue;
    buckets[le] += s.value;
  }
  h.buckets.assign(buckets.begin(), buckets.end());
}

absl::StatusOr<testing::PrometheusScrape> Scrape(int metrics_port) {
  ASSIGN_OR_RETURN(std::string body, testing::HttpGet("127.0.0.1", metrics_port, "/metrics", kScrapeTimeout));
  return testing::PrometheusScrape::Parse(body);
}

Histogram Minus(Histogram a, const Histogram& b) {
  for (size_t i = 0; i < a.buckets.size() && i < b.buckets.size(); ++i) a.buckets[i].second -= b.buckets[i].second;
  a.sum -= b.sum;
  return a;
}

// Prometheus' histogram_quantile: linear interpolation inside the bucket that
// holds rank q·count; the lowest bucket starts at 0; a rank in the +Inf
// bucket gives the highest finite bound. NaN without observations.
double Quantile(double q, const Histogram& h) {
  const std::vector<std::pair<double, double>>& buckets = h.buckets;
  if (h.count() <= 0) return NAN;
  const double rank = q * h.count();
  size_t b = 0;
  while (b + 1 < buckets.size() && buckets[b].second < rank) ++b;
  if (std::isinf(buckets[b].first)) return b > 0 ? buckets[b - 1].first : NAN;
  const double lower = b > 0 ? buckets[b - 1].first : 0.0;
  const double below = b > 0 ? buckets[b - 1].second : 0.0;
  const double in_bucket = buckets[b].second - below;
  if (in_bucket <= 0) return buckets[b].first;
  return lower + (buckets[b].first - lower) * (rank - below) / in_bucket;
}

// The highest finite bucket bound, and the fraction of observations above it.
double TopBound(const Histogram& h) { return h.buckets.size() < 2 ? NAN : h.buckets[h.buckets.size() - 2].first; }
double OverflowFraction(const Histogram& h) {
  if (h.count() <= 0 || h.buckets.size() < 2) return NAN;
  return (h.count() - h.buckets[h.buckets.size() - 2].second) / h.count();
}

}  // namespace

absl::StatusOr<Counters> ScrapeCounters(const cluster::ServiceEndpoints& router,
                                        const std::vector<cluster::ClusterMember>& workers) {
  Counters c;
  ASSIGN_OR_RETURN(testing::PrometheusScrape r, Scrape(router.metrics_port));
  AddHistogram(r, "kvfleet_router_overhead_seconds", c.overhead);
  for (const testing::Sample& s : r.samples()) {
    if (s.name == "kvfleet_router_routing_decisions_total" && s.labels.count("reason") > 0) {
      c.decisions[s.labels.at("reason")] += s.value;
    }
  }
  for (const cluster::ClusterMember& w : workers) {
    ASSIGN_OR_RETURN(testing::PrometheusScrape scrape, Scrape(w.endpoints.metrics_port));
    AddHistogram(scrape, "kvfleet_worker_engine_step_seconds", c.step_seconds);
    AddHistogram(scrape, "kvfleet_worker_engine_step_tokens", c.step_tokens);
  }
  if (c.overhead.buckets.empty() || c.step_seconds.buckets.empty()) {
    return absl::NotFoundError("the router's overhead or the workers' step histograms are missing from /metrics");
  }
  return c;
}

Counters Minus(Counters after, const Counters& before) {
  after.overhead = Minus(after.overhead, before.overhead);
  after.step_seconds = Minus(after.step_seconds, before.step_seconds);
  after.step_tokens = Minus(after.step_tokens, before.step_tokens);
  for (const auto& [reason, n] : before.decisions) after.decisions[reason] -= n;
  std::erase_if(after.decisions, [](const auto& kv) { return kv.second == 0; });
  return after;
}

// ---------------------------------------------------------------------------
// One phase's figures.

PhaseResult Summarize(const std::string& policy, const std::vector<BenchRequest>& requests,
                      const std::vector<Outcome>& outcomes, Counters metrics) {
  PhaseResult r{.policy = policy, .requests = static_cast<int64_t>(outcomes.size()), .metrics = std::move(metrics)};
  load::LatencyStats ttft;
  std::set<std::pair<int, std::string>> pairs;
  const Clock::time_point first_send = outcomes.front().sent;
  Clock::time_point last_end = first_send;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    last_end = std::max(last_end, o.finished);
    r.records.push_back({.sent_s = Seconds(o.sent - first_send),
                         .system_prompt = requests[i].system_prompt,
                         .worker_id = o.worker_id,
                         .prompt_tokens = o.prompt_tokens,
                         .cached_prompt_tokens = o.cached_prompt_tokens,
                         .ttft_s = o.status.ok() ? Seconds(o.first_token - o.sent) : NAN,
                         .e2e_s = Seconds(o.finished - o.sent),
                         .error = o.status.ok() ? "" : o.status.ToString()});
    if (!o.status.ok()) {
      if (r.failed++ == 0) r.first_error = o.status.ToString();
      continue;
    }
    r.prompt_tokens += o.prompt_tokens;
    r.cached_prompt_tokens += o.cached_prompt_tokens;
    r.generated_tokens += o.generated_tokens;
    ttft.Add(r.records.back().ttft_s);
    ++r.requests_per_worker[o.worker_id];
    pairs.emplace(requests[i].system_prompt, o.worker_id);
  }
  r.prompt_worker_pairs = static_cast<int64_t>(pairs.size());
  if (r.prompt_tokens > 0) r.hit_ratio = static_cast<double>(r.cached_prompt_tokens) / r.prompt_tokens;
  if (ttft.count() > 0) {
    r.ttft_p50_s = ttft.Percentile(50);
    r.ttft_p90_s = ttft.Percentile(90);
  }
  r.wall_s = Seconds(last_end - first_send);
  if (r.wall_s > 0) r.output_tokens_per_s = r.generated_tokens / r.wall_s;
  return r;
}

// ---------------------------------------------------------------------------
// Output.

namespace {

// "RR" for round_robin: the ratio columns' label.
std::string Initials(const std::string& policy) {
  std::string s;
  for (absl::string_view word : absl::StrSplit(policy, '_')) s += static_cast<char>(std::toupper(word[0]));
  return s;
}

std::string Ms(double seconds) { return std::isnan(seconds) ? "n/a" : absl::StrFormat("%.2f", seconds * 1e3); }

template <typename Map>
std::string JoinCounts(const Map& counts) {
  std::string s;
  for (const auto& [key, n] : counts) absl::StrAppend(&s, s.empty() ? "" : ", ", key, " ", n);
  return s.empty() ? "none" : s;
}

void PrintPlacement(const Options& o, const PhaseResult& r, FILE* out) {
  const Counters& m = r.metrics;
  std::fprintf(out, "%s: requests per worker: %s; (system prompt, worker) pairs %lld (min %lld); decisions: %s\n",
               r.policy.c_str(), JoinCounts(r.requests_per_worker).c_str(),
               static_cast<long long>(r.prompt_worker_pairs), static_cast<long long>(o.system_prompts),
               JoinCounts(m.decisions).c_str());
  std::fprintf(out,
               "%s: workers computed %.0f tokens in %.0f steps, mean step %.2f s (%.0f%% over %g s), %.0f tok/s "
               "while busy\n",
               r.policy.c_str(), m.step_tokens.sum, m.step_seconds.count(), m.step_seconds.sum / m.step_seconds.count(),
               100 * OverflowFraction(m.step_seconds), TopBound(m.step_seconds),
               m.step_tokens.sum / m.step_seconds.sum);
  if (r.failed > 0) {
    std::fprintf(out, "%s: %lld of %lld requests failed; first: %s\n", r.policy.c_str(),
                 static_cast<long long>(r.failed), static_cast<long long>(r.requests), r.first_error.c_str());
  }
}

Json ToJson(const PhaseResult& r, const PhaseResult& base) {
  Json requests = Json::array();
  for (const RequestRecord& q : r.records) {
    requests.push_back({{"sent_s", q.sent_s},
                        {"system_prompt", q.system_prompt},
                        {"worker_id", q.worker_id},
                        {"prompt_tokens", q.prompt_tokens},
                        {"cached_prompt_tokens", q.cached_prompt_tokens},
                        {"ttft_ms", q.ttft_s * 1e3},
                        {"e2e_ms", q.e2e_s * 1e3},
                        {"error", q.error}});
  }
  const Counters& m = r.metrics;
  return {{"policy", r.policy},
          {"requests", r.requests},
          {"failed", r.failed},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"generated_tokens", r.generated_tokens},
          {"hit_ratio", r.hit_ratio},
          {"ttft_p50_ms", r.ttft_p50_s * 1e3},
          {"ttft_p90_ms", r.ttft_p90_s * 1e3},
          {"output_tokens_per_s", r.output_tokens_per_s},
          {"wall_s", r.wall_s},
          {"ttft_p50_vs_baseline", r.ttft_p50_s / base.ttft_p50_s},
          {"output_tokens_per_s_vs_baseline", r.output_tokens_per_s / base.output_tokens_per_s},
          {"router_overhead_p50_ms", Quantile(0.5, m.overhead) * 1e3},
          {"router_overhead_p99_ms", Quantile(0.99, m.overhead) * 1e3},
          {"decisions", m.decisions},
          {"requests_per_worker", r.requests_per_worker},
          {"prompt_worker_pairs", r.prompt_worker_pairs},
          {"worker_tokens_computed", m.step_tokens.sum},
          {"worker_steps", m.step_seconds.count()},
          {"worker_busy_s", m.step_seconds.sum},
          {"requests_detail", requests}};
}

Json ToJson(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run) {
  Json config = {{"workers", o.workers},
                 {"system_prompts", o.system_prompts},
                 {"prompt_tokens_min", o.prompt_min},
                 {"prompt_tokens_max", o.prompt_max},
                 {"prompt_lengths", run.prompt_lengths},
                 {"oracle_hit_ratio", run.oracle_hit_ratio},
                 {"users_per_prompt", o.users_per_prompt},
                 {"question_tokens", o.question_tokens},
                 {"max_tokens", o.max_tokens},
                 {"rate", o.rate},
                 {"kv_cache_memory", o.kv_cache_memory},
                 {"threads", o.threads},
                 {"model", o.model},
                 {"seed", o.seed}};
  Json policies = Json::array();
  for (const PhaseResult& r : results) policies.push_back(ToJson(r, results.front()));
  return {{"config", config},
          {"baseline", results.front().policy},
          {"policies", policies},
          {"bench_wall_s", run.bench_s},
          {"load_average_before", run.load_before},
          {"load_average_after", run.load_after}};
}

}  // namespace

std::string Describe(const Options& o) {
  return absl::StrFormat(
      "%d workers, %d system prompts x %d-%d tokens, %d users each, %d-token questions, %d output tokens, %g req/s "
      "Poisson, KV %s/worker, %d thread(s)/worker",
      o.workers, o.system_prompts, o.prompt_min, o.prompt_max, o.users_per_prompt, o.question_tokens, o.max_tokens,
      o.rate, o.kv_cache_memory, o.threads);
}

// The 1-minute load average: the machine is shared, so the output says how busy it was.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one_minute = NAN;
  in >> one_minute;
  return one_minute;
}

double OracleHitRatio(const std::vector<BenchRequest>& requests, const Options& o, int32_t block_size) {
  std::vector<bool> seen(static_cast<size_t>(o.system_prompts), false);
  double reused = 0, prompt = 0;
  for (const BenchRequest& r : requests) {
    const auto length = static_cast<int64_t>(r.tokens.size());
    prompt += static_cast<double>(length);
    if (seen[static_cast<size_t>(r.system_prompt)]) {
      const int64_t shared = std::min(length - o.question_tokens, length - 1);
      reused += static_cast<double>((shared / block_size) * block_size);
    }
    seen[static_cast<size_t>(r.system_prompt)] = true;
  }
  return prompt > 0 ? reused / prompt : 0;
}

void PrintTable(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run, FILE* out) {
  const PhaseResult& base = results.front();
  std::fprintf(out, "router placement: %s\nsystem prompt lengths: %s tokens\n", Describe(o).c_str(),
               absl::StrJoin(run.prompt_lengths, ", ").c_str());
  const std::string vs = absl::StrCat(" vs ", Initials(base.policy));
  std::fprintf(out, "oracle hit ratio (each system prompt computed once): %.3f\n", run.oracle_hit_ratio);
  std::fprintf(out, "%-14s %9s %8s %12s %12s %13s %15s %15s %12s\n", "policy", "hit ratio", "/oracle", "TTFT p50 ms",
               "TTFT p90 ms", "output tok/s", ("TTFT p50" + vs).c_str(), ("TTFT p90" + vs).c_str(),
               ("tok/s" + vs).c_str());
  for (const PhaseResult& r : results) {
    std::fprintf(out, "%-14s %9.3f %8.3f %12.0f %12.0f %13.2f %14.2fx %14.2fx %11.2fx\n", r.policy.c_str(),
                 r.hit_ratio, r.hit_ratio / run.oracle_hit_ratio, r.ttft_p50_s * 1e3, r.ttft_p90_s * 1e3,
                 r.output_tokens_per_s, r.ttft_p50_s / base.ttft_p50_s, r.ttft_p90_s / base.ttft_p90_s,
                 r.output_tokens_per_s / base.output_tokens_per_s);
  }
  for (const PhaseResult& r : results) {
    std::fprintf(out, "router overhead per request (%s): p50 %s ms, p99 %s ms\n", r.policy.c_str(),
                 Ms(Quantile(0.5, r.metrics.overhead)).c_str(), Ms(Quantile(0.99, r.metrics.overhead)).c_str());
  }
  for (const PhaseResult& r : results) PrintPlacement(o, r, out);
  std::fprintf(out,
               "%s: TTFT p50 = policy / %s (lower is better), tok/s = policy / %s (higher is better); bench wall "
               "time %.0f s; load average %.2f before, %.2f after\n",
               vs.c_str() + 1, base.policy.c_str(), base.policy.c_str(), run.bench_s, run.load_before, run.load_after);
}

void PrintJson(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run, FILE* out) {
  std::fprintf(out, "%s\n", ToJson(o, results, run).dump().c_str());
}

}  // namespace kvfleet::bench::router_placement
