// router_placement_bench: the router's placement policies side by side on one
// local cluster, in one run. This file holds main(), the fleet (the cluster
// and the extra routers), the warm-up, one phase and the whole run; see
// router_placement_bench.h for what the bench measures and how the files
// divide the work, and bench/README.md ("Router placement") for how to read
// the output.
#include "bench/router_placement_bench.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tools/cluster/local_cluster.h"

namespace kvfleet::bench::router_placement {
namespace {

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

constexpr absl::Duration kReadyTimeout = absl::Minutes(2);

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
  options.models = {o.model};
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
// One phase (the whole workload through one router), and the whole run.

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

absl::Status Run(const Options& o) {
  const Clock::time_point start = Clock::now();
  RunInfo run{.load_before = LoadAverage()};
  const std::vector<BenchRequest> requests = BuildWorkload(o);
  run.oracle_hit_ratio = OracleHitRatio(requests, o);
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
  if (o.json) PrintJson(o, results, run, stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::bench::router_placement

namespace rp = kvfleet::bench::router_placement;

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (kvfleet::flags::WantsHelp(args)) {
    std::fputs(rp::kUsage, stdout);
    return 0;
  }
  absl::StatusOr<kvfleet::flags::Flags> flags = kvfleet::flags::Flags::Parse(
      args,
      {"system-prompts", "prompt-tokens", "users-per-prompt", "question-tokens", "max-tokens", "rate", "workers",
       "kv-cache-memory", "threads", "model", "bin-dir", "policies", "seed", "router-args"},
      {"json"});
  if (!flags.ok()) {
    std::fprintf(stderr, "router_placement_bench: %s\n\n%s", flags.status().ToString().c_str(), rp::kUsage);
    return 2;
  }
  absl::StatusOr<rp::Options> options = rp::ReadOptions(*flags);
  absl::Status status = options.ok() ? rp::Run(*options) : options.status();
  if (!status.ok()) {
    std::fprintf(stderr, "router_placement_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
