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
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "services/transport/grpc_channel.h"
#include "tests/testing/http_get.h"
#include "tests/testing/prometheus_text.h"
#include "tools/cluster/local_cluster.h"
#include "tools/load/latency_stats.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr char kUsage[] = R"(usage: router_placement_bench [--flag value ...]

prefix_aware vs least_loaded vs round_robin on one local cluster: a
cachemanager, N workers and one router per policy, the same multi-tenant
workload (long shared system prompts, short distinct questions, Poisson
arrivals) replayed through each router in turn. ~7 minutes on 2 cores.
  --system-prompts 4          shared system prompts (random token ids)
  --prompt-tokens 1024-2048   system prompt length, uniform in MIN-MAX
  --users-per-prompt 6        requests per system prompt, each with its own question
  --question-tokens 16        tokens after the system prompt, distinct per request
  --max-tokens 16             tokens generated per request (ignore_eos)
  --rate 0.25                 requests/s, Poisson arrivals
  --workers 3
  --kv-cache-memory 72MiB     per worker: SmolLM2-135M takes 23,040 B/token, so 3,264 tokens in 16-token
                              blocks; the defaults' prompts (1161, 1594, 1254, 1077 tokens) fit two at a
                              time on a worker, never three
  --threads 1                 CPU threads per worker
  --model PATH                GGUF model (default: the build's KVFLEET_DEFAULT_MODEL)
  --bin-dir DIR               build tree holding services/*/kvfleet-* (default: this binary's)
  --policies round_robin,least_loaded,prefix_aware
                              the phases, in order; the first is the baseline of the ratios
  --seed 1
  --router-args "ARGS"        appended to every router's command line, e.g. "--decision-memory 60000"
  --json                      one JSON object on stdout (with every request), the table on stderr
Progress and the log directory go to stderr.
)";

// Token ids 0-2 are special in SmolLM2's vocabulary; random prompts avoid them.
constexpr int32_t kFirstToken = 3;
constexpr int32_t kVocabSize = 49152;
constexpr absl::Duration kReadyTimeout = absl::Minutes(2);
constexpr std::chrono::minutes kRequestDeadline{20};
constexpr absl::Duration kScrapeTimeout = absl::Seconds(5);

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

absl::Status ParsePromptRange(const std::string& value, Options& o) {
  std::vector<std::string> parts = absl::StrSplit(value, '-');
  if (parts.size() == 1) parts.push_back(parts[0]);
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &o.prompt_min) || !absl::SimpleAtoi(parts[1], &o.prompt_max) ||
      o.prompt_min < 1 || o.prompt_max < o.prompt_min) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt-tokens wants MIN-MAX with 1 <= MIN <= MAX, got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ReadOptions(const flags::Flags& f) {
  Options o;
  ASSIGN_OR_RETURN(o.system_prompts, f.GetInt("system-prompts", o.system_prompts));
  RETURN_IF_ERROR(ParsePromptRange(f.GetString("prompt-tokens", "1024-2048"), o));
  ASSIGN_OR_RETURN(o.users_per_prompt, f.GetInt("users-per-prompt", o.users_per_prompt));
  ASSIGN_OR_RETURN(o.question_tokens, f.GetInt("question-tokens", o.question_tokens));
  ASSIGN_OR_RETURN(o.max_tokens, f.GetInt("max-tokens", o.max_tokens));
  ASSIGN_OR_RETURN(o.rate, f.GetDouble("rate", o.rate));
  ASSIGN_OR_RETURN(o.workers, f.GetInt("workers", o.workers));
  o.kv_cache_memory = f.GetString("kv-cache-memory", o.kv_cache_memory);
  ASSIGN_OR_RETURN(o.threads, f.GetInt("threads", o.threads));
  o.model = f.GetString("model", o.model);
  o.bin_dir = f.GetString("bin-dir", "");
  if (f.Has("policies")) o.policies = absl::StrSplit(f.GetString("policies", ""), ',', absl::SkipEmpty());
  if (f.Has("router-args")) {
    o.router_args = absl::StrSplit(f.GetString("router-args", ""), ' ', absl::SkipWhitespace());
  }
  const std::set<std::string> known = {"round_robin", "least_loaded", "prefix_aware"};
  const std::set<std::string> given(o.policies.begin(), o.policies.end());
  if (o.policies.empty() || given.size() != o.policies.size() ||
      !std::includes(known.begin(), known.end(), given.begin(), given.end())) {
    return absl::InvalidArgumentError("--policies wants distinct names among round_robin, least_loaded, prefix_aware");
  }
  ASSIGN_OR_RETURN(o.seed, f.GetInt("seed", o.seed));
  o.json = f.GetSwitch("json");
  if (o.system_prompts < 1 || o.users_per_prompt < 1 || o.question_tokens < 1 || o.max_tokens < 1 || !(o.rate > 0) ||
      !std::isfinite(o.rate) || o.workers < 1 || o.threads < 1) {
    return absl::InvalidArgumentError(
        "--system-prompts, --users-per-prompt, --question-tokens, --max-tokens, --workers and --threads must be "
        ">= 1 and --rate > 0");
  }
  return o;
}

// ---------------------------------------------------------------------------
// The workload: identical for every policy.

struct BenchRequest {
  double arrival_s = 0;  // from the start of the phase
  int system_prompt = 0;
  std::vector<int32_t> tokens;  // the system prompt, then this user's question
};

std::vector<BenchRequest> BuildWorkload(const Options& o) {
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed));
  std::uniform_int_distribution<int32_t> token(kFirstToken, kVocabSize - 1);
  std::uniform_int_distribution<int64_t> length(o.prompt_min, o.prompt_max);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.system_prompts));
  for (std::vector<int32_t>& p : prompts) {
    p.resize(static_cast<size_t>(length(rng)));
    for (int32_t& t : p) t = token(rng);
  }
  // Every (system prompt, user) pair once, in random order.
  std::vector<int> order;
  for (int p = 0; p < o.system_prompts; ++p) order.insert(order.end(), static_cast<size_t>(o.users_per_prompt), p);
  std::shuffle(order.begin(), order.end(), rng);
  std::exponential_distribution<double> gap(o.rate);
  std::vector<BenchRequest> requests;
  double t = 0;
  for (int p : order) {
    BenchRequest r{.arrival_s = t, .system_prompt = p, .tokens = prompts[static_cast<size_t>(p)]};
    for (int64_t i = 0; i < o.question_tokens; ++i) r.tokens.push_back(token(rng));
    requests.push_back(std::move(r));
    t += gap(rng);
  }
  return requests;
}

// ---------------------------------------------------------------------------
// The cluster: LocalCluster runs the cachemanager, the workers and a
// round_robin router; the other policies' routers are started beside it.

// The cluster's own router: it warms every worker up (one request each, in
// turn) before the first phase.
constexpr char kWarmUpPolicy[] = "round_robin";

struct Fleet {
  std::unique_ptr<cluster::LocalCluster> cluster;
  std::vector<cluster::ClusterMember> extra_routers;         // declared after `cluster`: destroyed first
  std::map<std::string, cluster::ServiceEndpoints> routers;  // policy -> its router's addresses
};

absl::StatusOr<std::string> DefaultBinDir() {
  ASSIGN_OR_RETURN(std::string exe, cluster::CurrentExecutable());
  return std::filesystem::path(exe).parent_path().parent_path().string();  // <build>/bench/x -> <build>
}

absl::Status StartRouter(const cluster::LocalClusterOptions& base, const std::string& policy,
                         const std::string& cachemanager_address, cluster::ClusterMember& member) {
  cluster::LocalClusterOptions options = base;
  options.policy = policy;
  member.label = absl::StrCat("router-", policy);
  member.program = "kvfleet-router";
  member.log_path = absl::StrCat(base.log_dir, "/", member.label, ".log");
  ASSIGN_OR_RETURN(member.process,
                   cluster::ChildProcess::Start(base.binaries.router,
                                                cluster::RouterArgs(options, cachemanager_address), member.log_path));
  absl::StatusOr<cluster::ServiceEndpoints> at =
      cluster::AwaitServiceReady(*member.process, member.program, absl::Now() + kReadyTimeout);
  if (!at.ok()) {
    return absl::UnavailableError(
        absl::StrCat(member.Describe(), ": ", at.status().message(), "\n", cluster::LogTail(member.log_path)));
  }
  member.endpoints = *at;
  return absl::OkStatus();
}

absl::StatusOr<Fleet> StartFleet(const Options& o, const std::string& log_dir) {
  std::string bin_dir = o.bin_dir;
  if (bin_dir.empty()) {
    ASSIGN_OR_RETURN(bin_dir, DefaultBinDir());
  }
  cluster::LocalClusterOptions options;
  ASSIGN_OR_RETURN(options.binaries, cluster::FindServiceBinaries(bin_dir));
  options.model_path = o.model;
  options.workers = static_cast<int>(o.workers);
  options.threads_per_worker = static_cast<int>(o.threads);
  options.kv_cache_memory = o.kv_cache_memory;
  options.router_listen = "127.0.0.1:0";
  options.cachemanager_listen = "127.0.0.1:0";
  options.router_metrics_port = 0;
  options.policy = kWarmUpPolicy;  // it also serves that policy's phase, when there is one
  options.router_extra_args = o.router_args;
  options.log_dir = log_dir;
  options.ready_timeout = kReadyTimeout;
  Fleet fleet;
  ASSIGN_OR_RETURN(fleet.cluster, cluster::LocalCluster::Start(options));
  fleet.routers[kWarmUpPolicy] = fleet.cluster->router().endpoints;
  for (const std::string& policy : o.policies) {
    if (fleet.routers.count(policy) > 0) continue;
    cluster::ClusterMember& member = fleet.extra_routers.emplace_back();
    RETURN_IF_ERROR(StartRouter(options, policy, fleet.cluster->cachemanager().endpoints.grpc_address, member));
    fleet.routers[policy] = member.endpoints;
  }
  return fleet;
}

absl::Status StopFleet(Fleet& fleet) {
  for (cluster::ClusterMember& r : fleet.extra_routers) r.process->Signal(SIGTERM);
  for (cluster::ClusterMember& r : fleet.extra_routers) (void)r.process->Wait(absl::Seconds(30));
  return fleet.cluster->Stop();
}

// A router learns of the workers from the cachemanager after it is ready;
// a phase must not start before it routes to all of them.
absl::Status AwaitWorkers(v1::Inference::Stub& stub, int64_t workers) {
  const absl::Time deadline = absl::Now() + kReadyTimeout;
  int32_t live = 0;
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListModelsResponse response;
    grpc::Status s = stub.ListModels(&ctx, v1::ListModelsRequest(), &response);
    live = s.ok() && response.models_size() > 0 ? response.models(0).live_workers() : 0;
    if (live >= workers) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("the router sees ", live, " of ", workers, " workers"));
}

// ---------------------------------------------------------------------------
// One request, and one phase (the whole workload through one router).

struct Outcome {
  absl::Status status;
  Clock::time_point sent, first_token, finished;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  std::string worker_id;  // the worker that produced the first token
};

Outcome SendOne(v1::Inference::Stub& stub, const BenchRequest& r, const Options& o, const std::string& salt) {
  v1::GenerateTextRequest request;
  request.mutable_prompt_token_ids()->Add(r.tokens.begin(), r.tokens.end());
  v1::GenerationOptions& options = *request.mutable_options();
  options.mutable_stopping()->set_max_tokens(static_cast<int32_t>(o.max_tokens));
  options.mutable_stopping()->set_ignore_eos(true);
  options.set_cache_salt(salt);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRequestDeadline);
  Outcome out;
  out.sent = Clock::now();
  std::unique_ptr<grpc::ClientReader<v1::GenerateTextResponse>> reader = stub.Generate(&ctx, request);
  v1::GenerateTextResponse message;
  bool first = true;
  while (reader->Read(&message)) {
    if (first && message.token_ids_size() > 0) {
      out.first_token = Clock::now();
      out.worker_id = message.worker_id();
      first = false;
    }
    if (message.has_usage()) {
      out.prompt_tokens = message.usage().prompt_tokens();
      out.cached_prompt_tokens = message.usage().cached_prompt_tokens();
      out.generated_tokens = message.usage().generated_tokens();
    }
  }
  const grpc::Status s = reader->Finish();
  out.finished = Clock::now();
  if (!s.ok()) {
    out.status = absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  } else if (first) {
    out.status = absl::InternalError("the stream ended without a token");
  }
  return out;
}

// Open loop: each request is sent at its arrival time on its own thread,
// whatever the earlier ones are doing.
std::vector<Outcome> Replay(v1::Inference::Stub& stub, const std::vector<BenchRequest>& requests, const Options& o,
                            const std::string& salt) {
  std::vector<Outcome> outcomes(requests.size());
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(requests[i].arrival_s)));
    threads.emplace_back([&, i] { outcomes[i] = SendOne(stub, requests[i], o, salt); });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

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

Histogram Minus(Histogram a, const Histogram& b) {
  for (size_t i = 0; i < a.buckets.size() && i < b.buckets.size(); ++i) a.buckets[i].second -= b.buckets[i].second;
  a.sum -= b.sum;
  return a;
}

Counters Minus(Counters after, const Counters& before) {
  after.overhead = Minus(after.overhead, before.overhead);
  after.step_seconds = Minus(after.step_seconds, before.step_seconds);
  after.step_tokens = Minus(after.step_tokens, before.step_tokens);
  for (const auto& [reason, n] : before.decisions) after.decisions[reason] -= n;
  std::erase_if(after.decisions, [](const auto& kv) { return kv.second == 0; });
  return after;
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

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

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

absl::StatusOr<PhaseResult> RunPhase(const std::string& policy, const cluster::ServiceEndpoints& router,
                                     const std::vector<cluster::ClusterMember>& workers,
                                     const std::vector<BenchRequest>& requests, const Options& o) {
  std::unique_ptr<v1::Inference::Stub> stub =
      v1::Inference::NewStub(transport::CreateClientChannel(router.grpc_address));
  RETURN_IF_ERROR(AwaitWorkers(*stub, o.workers));
  ASSIGN_OR_RETURN(Counters before, ScrapeCounters(router, workers));
  std::fprintf(stderr, "%s: %zu requests over %.0f s ...\n", policy.c_str(), requests.size(),
               requests.back().arrival_s);
  const std::vector<Outcome> outcomes = Replay(*stub, requests, o, absl::StrCat("router_placement_bench/", policy));
  ASSIGN_OR_RETURN(Counters after, ScrapeCounters(router, workers));
  PhaseResult r = Summarize(policy, requests, outcomes, Minus(std::move(after), before));
  std::fprintf(stderr, "%s: done in %.1f s, %lld failed\n", policy.c_str(), r.wall_s, static_cast<long long>(r.failed));
  return r;
}

// One short request per worker before the first phase, so no phase pays for
// a worker's first step (page faults in the weights, thread start-up).
absl::Status WarmUp(const cluster::ServiceEndpoints& round_robin_router, const Options& o) {
  std::unique_ptr<v1::Inference::Stub> stub =
      v1::Inference::NewStub(transport::CreateClientChannel(round_robin_router.grpc_address));
  RETURN_IF_ERROR(AwaitWorkers(*stub, o.workers));
  Options warm = o;
  warm.max_tokens = 2;
  for (int64_t i = 0; i < o.workers; ++i) {
    BenchRequest r;
    for (int32_t t = 0; t < 64; ++t) r.tokens.push_back(kFirstToken + t + static_cast<int32_t>(i) * 64);
    const Outcome out = SendOne(*stub, r, warm, "router_placement_bench/warm-up");
    if (!out.status.ok()) return out.status;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Output.

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

struct RunInfo {
  std::vector<int64_t> prompt_lengths;  // per system prompt
  double bench_s = 0;
  double load_before = NAN, load_after = NAN;
};

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

void PrintTable(const Options& o, const std::vector<PhaseResult>& results, const RunInfo& run, FILE* out) {
  const PhaseResult& base = results.front();
  std::fprintf(out, "router placement: %s\nsystem prompt lengths: %s tokens\n", Describe(o).c_str(),
               absl::StrJoin(run.prompt_lengths, ", ").c_str());
  const std::string vs = absl::StrCat(" vs ", Initials(base.policy));
  std::fprintf(out, "%-14s %9s %12s %12s %13s %15s %12s\n", "policy", "hit ratio", "TTFT p50 ms", "TTFT p90 ms",
               "output tok/s", ("TTFT p50" + vs).c_str(), ("tok/s" + vs).c_str());
  for (const PhaseResult& r : results) {
    std::fprintf(out, "%-14s %9.3f %12.0f %12.0f %13.2f %14.2fx %11.2fx\n", r.policy.c_str(), r.hit_ratio,
                 r.ttft_p50_s * 1e3, r.ttft_p90_s * 1e3, r.output_tokens_per_s, r.ttft_p50_s / base.ttft_p50_s,
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

absl::Status Run(const Options& o) {
  const Clock::time_point start = Clock::now();
  RunInfo run{.load_before = LoadAverage()};
  const std::vector<BenchRequest> requests = BuildWorkload(o);
  run.prompt_lengths.assign(static_cast<size_t>(o.system_prompts), 0);
  for (const BenchRequest& r : requests) {
    run.prompt_lengths[static_cast<size_t>(r.system_prompt)] =
        static_cast<int64_t>(r.tokens.size()) - o.question_tokens;
  }
  char log_dir[] = "/tmp/router_placement_bench.XXXXXX";
  if (mkdtemp(log_dir) == nullptr) return absl::InternalError("cannot create a log directory under /tmp");
  std::fprintf(stderr, "router placement: %s\nservice logs: %s\n", Describe(o).c_str(), log_dir);
  ASSIGN_OR_RETURN(Fleet fleet, StartFleet(o, log_dir));
  RETURN_IF_ERROR(WarmUp(fleet.routers.at(kWarmUpPolicy), o));
  std::vector<PhaseResult> results;
  for (const std::string& policy : o.policies) {
    ASSIGN_OR_RETURN(PhaseResult r, RunPhase(policy, fleet.routers.at(policy), fleet.cluster->workers(), requests, o));
    results.push_back(std::move(r));
    RETURN_IF_ERROR(fleet.cluster->CheckRunning());
  }
  const absl::Status stopped = StopFleet(fleet);
  if (!stopped.ok()) std::fprintf(stderr, "warning: %s\n", stopped.ToString().c_str());
  run.bench_s = Seconds(Clock::now() - start);
  run.load_after = LoadAverage();
  // With --json, stdout is for machines and the table joins the progress on stderr.
  PrintTable(o, results, run, o.json ? stderr : stdout);
  if (o.json) std::printf("%s\n", ToJson(o, results, run).dump().c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (kvfleet::flags::WantsHelp(args)) {
    std::fputs(kvfleet::bench::kUsage, stdout);
    return 0;
  }
  absl::StatusOr<kvfleet::flags::Flags> flags = kvfleet::flags::Flags::Parse(
      args,
      {"system-prompts", "prompt-tokens", "users-per-prompt", "question-tokens", "max-tokens", "rate", "workers",
       "kv-cache-memory", "threads", "model", "bin-dir", "policies", "seed", "router-args"},
      {"json"});
  if (!flags.ok()) {
    std::fprintf(stderr, "router_placement_bench: %s\n\n%s", flags.status().ToString().c_str(), kvfleet::bench::kUsage);
    return 2;
  }
  absl::StatusOr<kvfleet::bench::Options> options = kvfleet::bench::ReadOptions(*flags);
  absl::Status status = options.ok() ? kvfleet::bench::Run(*options) : options.status();
  if (!status.ok()) {
    std::fprintf(stderr, "router_placement_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
