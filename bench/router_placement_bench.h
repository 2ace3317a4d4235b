// router_placement_bench: the router's placement policies side by side on one
// local cluster, in one run (bench/README.md, "Router placement").
//
// The cluster: a cachemanager, --workers workers and one router per policy
// (routers are stateless, so three can front the same workers), all on
// loopback. The workload: a few long system prompts, each shared by several
// users who add a short question of their own, arriving as one Poisson
// stream. The same requests (same arrival times, prompts and questions) run
// through each router in turn: round_robin (the baseline), least_loaded,
// prefix_aware. Each phase has its own cache_salt, so every phase starts cold
// and none reuses another's cached blocks.
//
// Measured per policy, client-side: prefix-cache hit ratio (cached prompt
// tokens / prompt tokens, from each response's usage), TTFT p50 / p90 (send
// to the first message with tokens), output tokens/s (generated tokens / time
// from the first send to the last end) and their ratios to round_robin. From
// each router's /metrics: its added latency per request (p50 / p99 estimated
// from the kvfleet_router_overhead_seconds buckets, as Prometheus'
// histogram_quantile does) and its routing decisions by reason; from the
// workers' /metrics: the tokens their engines computed and how long a step
// took (the age of the load they report: a worker refreshes it once a step).
// --json adds every request (sent at, system prompt, worker, cached tokens,
// TTFT) for a closer look at the placements.
//
// The files divide the work:
//   - router_placement_bench.cc: main() and its usage text, the fleet (the
//     local cluster and the extra routers: start, stop), the warm-up, one
//     phase (RunPhase) and the whole run (Run);
//   - router_placement_bench_workload.cc: the options, the workload (system
//     prompts, questions, Poisson arrivals), one request (SendOne) and one
//     phase's open-loop replay (Replay);
//   - router_placement_bench_report.cc: the router's and the workers'
//     /metrics (scrape, subtract, histogram quantiles), one phase's figures
//     (Summarize), the table and the JSON.
//
// Not a library and not a test: nothing here is run in CI. See bench/README.md.
//
//   router_placement_bench --policies round_robin,prefix_aware --rate 0.5
//   router_placement_bench --json > placement.json
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "tools/cluster/local_cluster.h"

namespace kvfleet::bench::router_placement {

using Clock = std::chrono::steady_clock;

// Token ids 0-2 are special in SmolLM2's vocabulary; random prompts avoid them.
constexpr int32_t kFirstToken = 3;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---------------------------------------------------------------------------
// Options (router_placement_bench_workload.cc parses them).

struct Options {
  int64_t system_prompts = 4;
  int64_t prompt_min = 1024;
  int64_t prompt_max = 2048;
  int64_t users_per_prompt = 6;
  int64_t question_tokens = 16;
  int64_t max_tokens = 16;
  double rate = 0.25;
  int64_t workers = 3;
  std::string kv_cache_memory = "72MiB";
  int64_t threads = 1;
  std::string model = KVFLEET_DEFAULT_MODEL_PATH;
  std::string bin_dir;
  // The phases, in order; the first is the baseline of the ratios.
  std::vector<std::string> policies = {"round_robin", "least_loaded", "prefix_aware"};
  int64_t seed = 1;
  bool json = false;
  // Appended to every router's command line, e.g. "--decision-memory 60000".
  std::vector<std::string> router_args;
};

// The flags, checked; the defaults above for those not given.
absl::StatusOr<Options> ReadOptions(const flags::Flags& f);

// ---------------------------------------------------------------------------
// The workload: identical for every policy (router_placement_bench_workload.cc).

struct BenchRequest {
  double arrival_s = 0;  // from the start of the phase
  int system_prompt = 0;
  std::vector<int32_t> tokens;  // the system prompt, then this user's question
};

// --system-prompts random prompts, every (system prompt, user) pair once in
// random order with Poisson arrival times; the same for the same --seed.
std::vector<BenchRequest> BuildWorkload(const Options& o);

// One request as the client saw it.
struct Outcome {
  absl::Status status;
  Clock::time_point sent, first_token, finished;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  std::string worker_id;  // the worker that produced the first token
};

// Sends `r` through `stub` with cache_salt `salt` and waits for its end.
Outcome SendOne(v1::Inference::Stub& stub, const BenchRequest& r, const Options& o, const std::string& salt);

// The whole workload through `stub`, open loop: each request is sent at its
// arrival time on its own thread. The outcomes are in the requests' order.
std::vector<Outcome> Replay(v1::Inference::Stub& stub, const std::vector<BenchRequest>& requests, const Options& o,
                            const std::string& salt);

// ---------------------------------------------------------------------------
// Metrics, scraped before and after a phase: the router's own, and the
// workers' engine steps (how much they computed, and how long a step took).

struct Histogram {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count), ascending le, +Inf last
  double sum = 0;
  double count() const { return buckets.empty() ? 0 : buckets.back().second; }
};

struct Counters {
  Histogram overhead;                       // the router's, in seconds
  std::map<std::string, double> decisions;  // the router's, by reason
  Histogram step_seconds, step_tokens;      // every worker's engine steps together
};

// The router's and every worker's /metrics, added up.
absl::StatusOr<Counters> ScrapeCounters(const cluster::ServiceEndpoints& router,
                                        const std::vector<cluster::ClusterMember>& workers);

// What happened between two scrapes.
Counters Minus(Counters after, const Counters& before);

// ---------------------------------------------------------------------------
// One phase's figures.

// One request as the client saw it (the JSON output lists them all).
struct RequestRecord {
  double sent_s = 0;  // from the phase's first send
  int system_prompt = 0;
  std::string worker_id;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0;
  double ttft_s = NAN, e2e_s = 0;
  std::string error;  // empty when it succeeded
};

struct PhaseResult {
  std::string policy;
  int64_t requests = 0, failed = 0;
  std::string first_error;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  double hit_ratio = NAN, ttft_p50_s = NAN, ttft_p90_s = NAN, output_tokens_per_s = NAN, wall_s = NAN;
  std::map<std::string, int64_t> requests_per_worker;
  // Distinct (system prompt, worker) pairs: each is at least one computation
  // of that prompt's prefix; the number of system prompts is the minimum.
  int64_t prompt_worker_pairs = 0;
  Counters metrics;                    // this phase's share of the router's and the workers' counters
  std::vector<RequestRecord> records;  // in arrival order
};

// The whole run, for the output.
struct RunInfo {
  std::vector<int64_t> prompt_lengths;  // per system prompt
  // The best hit ratio any placement could reach on this run's requests:
  // each system prompt computed once, every later request reusing its full
  // blocks (OracleHitRatio).
  double oracle_hit_ratio = NAN;
  double bench_s = 0;
  double load_before = NAN, load_after = NAN;
};

// One phase's figures from its outcomes (in the requests' order) and its share
// of the counters (router_placement_bench_report.cc, like the rest below).
PhaseResult Summarize(const std::string& policy, const std::vector<BenchRequest>& requests,
                      const std::vector<Outcome>& outcomes, Counters metrics);

// Cached prompt tokens / prompt tokens if each system prompt's full blocks
// were computed once and every later request sharing it found them cached
// (its last prompt token is always computed). The workers' KV holds every
// prompt at once with the defaults, so no cache size lowers it there.
double OracleHitRatio(const std::vector<BenchRequest>& requests, const Options& o, int32_t block_size = 16);

// The options in one line.
std::string Describe(const Options& o);

// The 1-minute load average: the machine is shared, so the output says how busy it was.
double LoadAverage();

// The table (with every policy's ratio to the first, the baseline), and the
// same figures with every request as one JSON object on a line.
void PrintTable(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run, FILE* out);
void PrintJson(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run, FILE* out);

}  // namespace kvfleet::bench::router_placement
