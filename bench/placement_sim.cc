// placement_sim: main(), flags and output (placement_sim.h; bench/README.md,
// "Placement simulator").
//
//   placement_sim --workload multi-tenant --workers 4,16,64 --load 0.3,0.7,0.9,1.1
//   placement_sim --workload no-sharing --workers 16 --requests 10000 --json
//   placement_sim --workload hot-prefix --policies prefix_aware --peer-pull off,on --network-gbps 10,100
//   placement_sim --workload chat-docs --workers 16 --load 0.7,0.9 --prefill-workers 0,1:7,1:3,1:1
#include "bench/placement_sim.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/placement_sim_split_report.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"

namespace kvfleet::bench::placement_sim {

namespace {

constexpr char kUsage[] = R"(usage: placement_sim [flags]

The router's real placement code over simulated workers (the engine's real
scheduler, KV cache manager and block pool; a step-time model instead of the
model). Deterministic for a seed; every policy sees the same trace.

  --workload NAME          multi-tenant (default), multi-turn, hot-prefix, no-sharing or chat-docs
  --workers N,N            worker counts (default 4,16,64)
  --load X,X               offered token rate / the cluster's peak (default 0.3,0.7,0.9,1.1; chat-docs:
                           offered worker time / the workers, see --doc-share)
  --rate R                 or: requests per second (overrides --load)
  --requests N             requests per run (default 10000)
  --seed N                 (default 1)
  --policies A,B           (default round_robin,least_loaded,prefix_aware)
  --step-model NAME        gpu (default) or cpu
  --step-a S --step-b S --step-c S   or: the step-time coefficients, seconds
  --kv-tokens N            KV tokens per worker (default: 3 tenants' contexts plus 25%; chat-docs:
                           1,600 × max_num_seqs)
  --max-num-seqs N         (default 256 gpu, 64 cpu)
  --max-num-batched-tokens N  (default 8192 gpu, 512 cpu)
  --tenants N --context-tokens N --question-tokens N --output-tokens N
  --sessions-off           multi-turn: send no session ids
  --turns N --think-seconds S  multi-turn conversations (default 6 turns, 5 s apart)
  --zipf X                 hot-prefix skew (default 1.2)
  --doc-share X --doc-tokens N  chat-docs: the share of documents (default 0.2) and their length (3000);
                           chats have 100-300-token prompts and 200-400-token answers, documents 16-64
                           tokens; --load counts each request's time at full batches (placement_sim.h)
  --router-ms MS --load-delay-ms MS --event-flush-ms MS --event-delay-ms MS   propagation (1, 2, 50, 2)
  --prefill-weight A --decode-weight B --kv-pressure-weight W --affinity-guard-margin N
  --affinity-guard-ratio R the router's placement knobs (its defaults otherwise)
  --host-tier X            a host-memory KV tier per worker of X times its device KV (default 0: none)
  --disk-tier X            a disk KV tier per worker of X times its device KV (default 0: none)
  --host-gbps G --disk-gbps G  their load bandwidths, GB/s (default 25 and 3): a load's time delays its step
  --kv-bytes-per-token N   what a token's KV weighs, for tier loads and pulls (default 131072: Llama-3-8B, float16)
  --peer-pull off,on       run each policy without and/or with peer KV pulls (default off)
  --network-gbps G,G       each worker's link for pulls, Gb/s; one run per rate with pulls on (default 100)
  --pull-latency-ms MS     added to every pull (default 1)
  --pull-assumed-gbps G    what the router prices a first pull at (default: the link's rate; the router's own is 8)
  --crossover              print only where a pull beats recomputing, per --network-gbps
  --prefill-workers L      the roles sweep: each entry is 0 (aggregated: every worker both), a count
                           of prefill workers or a ratio p:d (the rest decode), e.g. 0,1:7,1:3,1:1;
                           one policy (default prefix_aware), peer pulls on, each --network-gbps
  --split-min-uncached-tokens N  the router's split threshold (default 2048)
  --lease-seconds S        the prefill worker's lease on a handed-off prompt (default 30)
  --split-stream-first-token  a split's first token goes out when the prefill worker has it (the router's flag);
                           by default it waits for the decode worker's, and the handoff is in the TTFT
  --ttft-objective S --itl-objective-ms MS   goodput's objectives: TTFT and the request's own p99
                           inter-token gap (default 1 s and 50 ms gpu, 10 s and 500 ms cpu)
  --adapters N             LoRA adapters: each group's requests (tenant, session, prefix) run under adapter
                           group mod N, its KV its own (default 0: the base model only)
  --max-loras N --lora-load-ms MS  each worker's adapter slots and a load's time, added to its next
                           step (default 4 and 20)
  --lora-placement L       aware (the router's: residency priced by the load time), unaware (as if every
                           adapter were resident everywhere), or both (default aware)
  --admission-bypass N     admissions that may pass a waiting request that does not fit (default 16; 0: strict order)
  --json                   one JSON object on stdout (the table goes to stderr)
)";

struct Flags {
  WorkloadOptions workload;
  std::vector<int64_t> workers;
  std::vector<double> loads;
  double rate = 0;
  std::vector<router::Policy> policies;
  SimOptions sim;
  int64_t kv_tokens = 0;
  bool json = false;
  // Each policy runs once per entry: pulls off, or on over a link of gbps.
  struct PullSetting {
    bool on = false;
    double gbps = 0;
  };
  std::vector<PullSetting> pulls;
  std::vector<double> network_gbps;
  bool crossover = false;
  std::vector<RolesSpec> roles;           // --prefill-workers: the roles sweep instead of the policies table
  std::vector<bool> lora_aware = {true};  // --lora-placement: each policy runs once per entry
};

absl::Status ReadPullFlags(const flags::Flags& f, Flags& o) {
  ASSIGN_OR_RETURN(o.network_gbps, f.GetDoubleList("network-gbps", "100"));
  ASSIGN_OR_RETURN(o.sim.pull_latency_ms, f.GetDouble("pull-latency-ms", o.sim.pull_latency_ms));
  ASSIGN_OR_RETURN(o.sim.peer_pull_assumed_gbps, f.GetDouble("pull-assumed-gbps", 0));
  for (double g : o.network_gbps) {
    if (!(g > 0)) return absl::InvalidArgumentError(absl::StrCat("--network-gbps takes rates > 0, got ", g));
  }
  if (!(o.sim.pull_latency_ms >= 0) || !(o.sim.peer_pull_assumed_gbps >= 0)) {
    return absl::InvalidArgumentError("--pull-latency-ms and --pull-assumed-gbps take numbers >= 0");
  }
  for (absl::string_view setting : absl::StrSplit(f.GetString("peer-pull", "off"), ',')) {
    if (setting == "off") {
      o.pulls.push_back({.on = false});
    } else if (setting == "on") {
      for (double g : o.network_gbps) o.pulls.push_back({.on = true, .gbps = g});
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--peer-pull takes on and off, got '", setting, "'"));
    }
  }
  o.crossover = f.GetSwitch("crossover");
  return absl::OkStatus();
}

// The roles sweep's flags and the chat-docs workload's; objectives default
// by step model (a gpu decode step at full batch takes about 25 ms, a cpu
// one about 200 ms: the inter-token objective is twice that).
absl::Status ReadRolesFlags(const flags::Flags& f, bool gpu, Flags& o) {
  WorkloadOptions& w = o.workload;
  ASSIGN_OR_RETURN(w.doc_share, f.GetDouble("doc-share", w.doc_share));
  ASSIGN_OR_RETURN(w.doc_tokens, f.GetInt("doc-tokens", w.doc_tokens));
  if (!(w.doc_share >= 0 && w.doc_share <= 1) || w.doc_tokens < 1) {
    return absl::InvalidArgumentError("--doc-share takes a share in [0, 1], --doc-tokens a count >= 1");
  }
  if (f.Has("prefill-workers")) {
    ASSIGN_OR_RETURN(o.roles, ParseRoles(f.GetString("prefill-workers", "")));
  }
  ASSIGN_OR_RETURN(int64_t split_tokens, f.GetInt("split-min-uncached-tokens", o.sim.split.min_uncached_tokens));
  o.sim.split.min_uncached_tokens = static_cast<int32_t>(std::clamp<int64_t>(split_tokens, 0, int64_t{1} << 30));
  RETURN_IF_ERROR(o.sim.split.Validate());
  ASSIGN_OR_RETURN(o.sim.lease_seconds, f.GetDouble("lease-seconds", o.sim.lease_seconds));
  o.sim.split_stream_first_token = f.GetSwitch("split-stream-first-token");
  ASSIGN_OR_RETURN(o.sim.ttft_objective_s, f.GetDouble("ttft-objective", gpu ? 1.0 : 10.0));
  ASSIGN_OR_RETURN(double itl_ms, f.GetDouble("itl-objective-ms", gpu ? 50.0 : 500.0));
  o.sim.itl_objective_s = itl_ms / 1000;
  if (!(o.sim.lease_seconds > 0) || !(o.sim.ttft_objective_s > 0) || !(o.sim.itl_objective_s > 0)) {
    return absl::InvalidArgumentError("--lease-seconds, --ttft-objective and --itl-objective-ms take numbers > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<Flags> ReadFlags(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f,
                   flags::Flags::Parse(args,
                                       {"workload",
                                        "workers",
                                        "load",
                                        "rate",
                                        "requests",
                                        "seed",
                                        "policies",
                                        "step-model",
                                        "step-a",
                                        "step-b",
                                        "step-c",
                                        "kv-tokens",
                                        "max-num-seqs",
                                        "host-tier",
                                        "disk-tier",
                                        "host-gbps",
                                        "disk-gbps",
                                        "kv-bytes-per-token",
                                        "max-num-batched-tokens",
                                        "tenants",
                                        "context-tokens",
                                        "question-tokens",
                                        "output-tokens",
                                        "turns",
                                        "think-seconds",
                                        "zipf",
                                        "router-ms",
                                        "load-delay-ms",
                                        "event-flush-ms",
                                        "event-delay-ms",
                                        "prefill-weight",
                                        "decode-weight",
                                        "affinity-guard-margin",
                                        "affinity-guard-ratio",
                                        "kv-pressure-weight",
                                        "admission-bypass",
                                        "peer-pull",
                                        "network-gbps",
                                        "pull-latency-ms",
                                        "pull-assumed-gbps",
                                        "doc-share",
                                        "doc-tokens",
                                        "prefill-workers",
                                        "split-min-uncached-tokens",
                                        "lease-seconds",
                                        "ttft-objective",
                                        "itl-objective-ms",
                                        "adapters",
                                        "max-loras",
                                        "lora-load-ms",
                                        "lora-placement"},
                                       {"json", "sessions-off", "crossover", "split-stream-first-token", "help"}));
  if (f.GetSwitch("help")) return absl::CancelledError(kUsage);
  Flags o;
  WorkloadOptions& w = o.workload;
  ASSIGN_OR_RETURN(w.kind, ParseWorkload(f.GetString("workload", "multi-tenant")));
  ASSIGN_OR_RETURN(w.requests, f.GetInt("requests", w.requests));
  ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 1));
  w.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(w.tenants, f.GetInt("tenants", w.kind == WorkloadKind::kHotPrefix ? 32 : w.tenants));
  ASSIGN_OR_RETURN(w.context_tokens, f.GetInt("context-tokens", w.context_tokens));
  ASSIGN_OR_RETURN(w.question_tokens, f.GetInt("question-tokens", w.question_tokens));
  ASSIGN_OR_RETURN(w.output_tokens, f.GetInt("output-tokens", w.output_tokens));
  ASSIGN_OR_RETURN(w.turns, f.GetInt("turns", w.turns));
  ASSIGN_OR_RETURN(w.think_seconds, f.GetDouble("think-seconds", w.think_seconds));
  ASSIGN_OR_RETURN(w.zipf, f.GetDouble("zipf", w.zipf));
  if (w.requests < 1 || w.tenants < 1 || w.context_tokens < 0 || w.question_tokens < 1 || w.output_tokens < 1 ||
      w.turns < 1 || w.think_seconds < 0 || w.zipf < 0) {
    return absl::InvalidArgumentError(
        "--requests, --tenants, --question-tokens, --output-tokens and --turns must be >= 1; --context-tokens, "
        "--think-seconds and --zipf >= 0");
  }
  ASSIGN_OR_RETURN(o.workers, f.GetIntList("workers", "4,16,64"));
  for (int64_t n : o.workers) {
    if (n < 1 || n > 64) return absl::InvalidArgumentError("--workers takes counts from 1 to 64");
  }
  ASSIGN_OR_RETURN(o.loads, f.GetDoubleList("load", "0.3,0.7,0.9,1.1"));
  for (double load : o.loads) {
    if (!(load > 0)) return absl::InvalidArgumentError(absl::StrCat("--load takes positive numbers, got ", load));
  }
  ASSIGN_OR_RETURN(o.rate, f.GetDouble("rate", 0));
  const std::string default_policies =
      f.Has("prefill-workers") ? "prefix_aware" : "round_robin,least_loaded,prefix_aware";
  for (absl::string_view name : absl::StrSplit(f.GetString("policies", default_policies), ',')) {
    ASSIGN_OR_RETURN(router::Policy p, router::ParsePolicy(std::string(name)));
    o.policies.push_back(p);
  }
  ClusterShape& c = o.sim.cluster;
  ASSIGN_OR_RETURN(c.model, NamedStepModel(f.GetString("step-model", "gpu")));
  ASSIGN_OR_RETURN(c.model.a, f.GetDouble("step-a", c.model.a));
  ASSIGN_OR_RETURN(c.model.b, f.GetDouble("step-b", c.model.b));
  ASSIGN_OR_RETURN(c.model.c, f.GetDouble("step-c", c.model.c));
  if (f.Has("step-a") || f.Has("step-b") || f.Has("step-c")) c.model.name += " (adjusted)";
  const bool gpu = c.model.name.rfind("gpu", 0) == 0;
  ASSIGN_OR_RETURN(int64_t seqs, f.GetInt("max-num-seqs", gpu ? 256 : 64));
  ASSIGN_OR_RETURN(int64_t batched, f.GetInt("max-num-batched-tokens", gpu ? 8192 : 512));
  c.max_num_seqs = static_cast<int32_t>(seqs);
  c.max_num_batched_tokens = static_cast<int32_t>(batched);
  ASSIGN_OR_RETURN(int64_t bypass, f.GetInt("admission-bypass", c.admission_bypass_limit));
  if (bypass < 0) return absl::InvalidArgumentError("--admission-bypass takes a count >= 0");
  c.admission_bypass_limit = static_cast<int32_t>(bypass);
  const int64_t default_kv = w.kind == WorkloadKind::kChatDocs
                                 ? seqs * 1600
                                 : (3 * (w.context_tokens + w.question_tokens + w.output_tokens) * 5) / 4;
  ASSIGN_OR_RETURN(c.kv_tokens, f.GetInt("kv-tokens", default_kv));
  if (seqs < 1 || batched < 16 || c.kv_tokens < 16 || !(c.model.a >= 0 && c.model.b > 0 && c.model.c >= 0)) {
    return absl::InvalidArgumentError(
        "--max-num-seqs >= 1, --max-num-batched-tokens >= 16, --kv-tokens >= 16, step a, c >= 0 and b > 0");
  }
  ASSIGN_OR_RETURN(o.sim.router_ms, f.GetDouble("router-ms", o.sim.router_ms));
  ASSIGN_OR_RETURN(o.sim.load_delay_ms, f.GetDouble("load-delay-ms", o.sim.load_delay_ms));
  ASSIGN_OR_RETURN(o.sim.event_flush_ms, f.GetDouble("event-flush-ms", o.sim.event_flush_ms));
  ASSIGN_OR_RETURN(o.sim.event_delay_ms, f.GetDouble("event-delay-ms", o.sim.event_delay_ms));
  o.sim.sessions = !f.GetSwitch("sessions-off");
  ASSIGN_OR_RETURN(double host_x, f.GetDouble("host-tier", 0));
  ASSIGN_OR_RETURN(double disk_x, f.GetDouble("disk-tier", 0));
  ASSIGN_OR_RETURN(o.sim.host_gb_per_s, f.GetDouble("host-gbps", o.sim.host_gb_per_s));
  ASSIGN_OR_RETURN(o.sim.disk_gb_per_s, f.GetDouble("disk-gbps", o.sim.disk_gb_per_s));
  ASSIGN_OR_RETURN(o.sim.kv_bytes_per_token, f.GetInt("kv-bytes-per-token", o.sim.kv_bytes_per_token));
  if (host_x < 0 || disk_x < 0 || !(o.sim.host_gb_per_s > 0) || !(o.sim.disk_gb_per_s > 0) ||
      o.sim.kv_bytes_per_token < 1) {
    return absl::InvalidArgumentError("--host-tier and --disk-tier >= 0; bandwidths and --kv-bytes-per-token > 0");
  }
  o.sim.host_tier_tokens = static_cast<int64_t>(host_x * static_cast<double>(c.kv_tokens));
  o.sim.disk_tier_tokens = static_cast<int64_t>(disk_x * static_cast<double>(c.kv_tokens));
  RETURN_IF_ERROR(ReadPullFlags(f, o));
  RETURN_IF_ERROR(ReadRolesFlags(f, gpu, o));
  router::PlacementOptions& p = o.sim.placement;
  ASSIGN_OR_RETURN(p.prefill_weight, f.GetDouble("prefill-weight", p.prefill_weight));
  ASSIGN_OR_RETURN(p.decode_weight, f.GetDouble("decode-weight", p.decode_weight));
  ASSIGN_OR_RETURN(p.kv_pressure_weight, f.GetDouble("kv-pressure-weight", p.kv_pressure_weight));
  ASSIGN_OR_RETURN(p.affinity_guard_ratio, f.GetDouble("affinity-guard-ratio", p.affinity_guard_ratio));
  ASSIGN_OR_RETURN(int64_t margin, f.GetInt("affinity-guard-margin", p.affinity_guard_margin));
  p.affinity_guard_margin = static_cast<int32_t>(margin);
  RETURN_IF_ERROR(p.Validate());
  o.json = f.GetSwitch("json");
  ASSIGN_OR_RETURN(w.adapters, f.GetInt("adapters", 0));
  ASSIGN_OR_RETURN(int64_t max_loras, f.GetInt("max-loras", o.sim.max_loras));
  ASSIGN_OR_RETURN(o.sim.lora_load_ms, f.GetDouble("lora-load-ms", o.sim.lora_load_ms));
  if (w.adapters < 0 || max_loras < 1 || max_loras > 1024 || o.sim.lora_load_ms < 0) {
    return absl::InvalidArgumentError("--adapters >= 0, --max-loras in [1, 1024] and --lora-load-ms >= 0");
  }
  o.sim.max_loras = static_cast<int32_t>(max_loras);
  const std::string placement = f.GetString("lora-placement", "aware");
  if (placement == "aware" || placement == "unaware" || placement == "both") {
    o.lora_aware = placement == "both" ? std::vector<bool>{true, false} : std::vector<bool>{placement == "aware"};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-placement takes aware, unaware or both, not '", placement, "'"));
  }
  return o;
}

struct Run {
  int64_t workers;
  double load;
  OracleHitRatios oracle;
  double seconds;
  std::vector<SimResult> results;
  std::vector<Flags::PullSetting> pulls;  // each result's
};

bool AnyPulls(const Flags& o) {
  for (const Flags::PullSetting& p : o.pulls) {
    if (p.on) return true;
  }
  return false;
}

// "prefix_aware" with pulls off, "prefix_aware, pulls 100G" with them on.
std::string RunName(const SimResult& r, const Flags::PullSetting& pull) {
  return pull.on ? absl::StrCat(r.policy, ", pulls ", pull.gbps, "G") : r.policy;
}

void PrintCrossover(const Flags& o, FILE* out) {
  const ClusterShape& c = o.sim.cluster;
  std::fprintf(out,
               "\nPeer pull crossover (%s step model, peak prefill %.0f tokens/s; %lld bytes a token, %lld tokens a "
               "block; %.2f ms a pull):\n%-10s %14s %17s %12s %11s %18s\n",
               c.model.name.c_str(), c.PeakTokensPerSecond(), static_cast<long long>(o.sim.kv_bytes_per_token),
               static_cast<long long>(c.block_size), o.sim.pull_latency_ms, "link", "pull ms/block", "prefill ms/block",
               "pull/prefill", "min blocks", "min prompt tokens");
  for (double gbps : o.network_gbps) {
    const PullCrossover x = PullCrossoverFor(c, o.sim.kv_bytes_per_token, gbps, o.sim.pull_latency_ms / 1000);
    const std::string blocks = x.min_blocks < 0 ? "never" : absl::StrCat(x.min_blocks);
    const std::string tokens = x.min_prompt_tokens < 0 ? "never" : absl::StrCat(x.min_prompt_tokens);
    std::fprintf(out, "%-10s %14.3f %17.3f %12.2f %11s %18s\n", absl::StrCat(gbps, " Gb/s").c_str(),
                 x.pull_seconds_per_block * 1000, x.prefill_seconds_per_block * 1000,
                 x.pull_seconds_per_block / x.prefill_seconds_per_block, blocks.c_str(), tokens.c_str());
  }
}

void PrintRun(const Flags& o, const Run& run, FILE* out) {
  std::fprintf(out,
               "\n%s, %lld workers, load %.2f (oracle hit ratio: bound %.3f, with this KV about %.3f; %.1f s to "
               "simulate)\n",
               WorkloadName(o.workload.kind).c_str(), static_cast<long long>(run.workers), run.load, run.oracle.bound,
               run.oracle.capacity_estimate, run.seconds);
  const bool pulls = AnyPulls(o);
  const bool adapters = o.workload.adapters > 0;
  std::fprintf(out, "%-24s %9s %9s %9s %11s %6s %6s %7s %12s %9s %9s %8s %8s", "policy", "TTFT p50", "p90 s", "p99 s",
               "tok/s", "hit", "lower", "/oracle", "computed", "run max", "run mean", "max/mean", "preempt");
  if (pulls) std::fprintf(out, " %9s %8s %10s %10s %9s", "pull dec", "pulls", "blocks", "blocks hit", "declined");
  if (adapters) std::fprintf(out, " %9s %8s %8s", "slot hit", "loads", "waits");
  std::fprintf(out, "\n");
  for (size_t k = 0; k < run.results.size(); ++k) {
    const SimResult& r = run.results[k];
    std::fprintf(out, "%-24s %9.3f %9.3f %9.3f %11.0f %6.3f %6.3f %7.3f %12lld %9.1f %9.1f %8.2f %8lld",
                 RunName(r, run.pulls[k]).c_str(), r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s, r.throughput_tokens_per_s,
                 r.hit_ratio, r.lower_tier_hit_ratio, run.oracle.bound > 0 ? r.hit_ratio / run.oracle.bound : 0.0,
                 static_cast<long long>(r.tokens_computed), r.max_running, r.mean_running,
                 r.mean_running > 0 ? r.max_running / r.mean_running : 0.0, static_cast<long long>(r.preemptions));
    if (pulls) {
      std::fprintf(out, " %9lld %8lld %10lld %10lld %9lld", static_cast<long long>(r.pull_decisions),
                   static_cast<long long>(r.pulls), static_cast<long long>(r.blocks_pulled),
                   static_cast<long long>(r.pulled_blocks_hit), static_cast<long long>(r.pulls_declined));
    }
    if (adapters) {
      std::fprintf(out, " %9.3f %8lld %8lld", r.lora_slot_hit_ratio, static_cast<long long>(r.lora_loads),
                   static_cast<long long>(r.lora_waits));
    }
    std::fprintf(out, "%s\n", r.audit.empty() ? "" : ("  AUDIT: " + r.audit).c_str());
  }
  auto compare = [out](const std::string& name, const SimResult& r, const std::string& base_name,
                       const SimResult& base) {
    std::fprintf(out, "  %s vs %s: TTFT p90 %.2fx better, throughput %.2fx\n", name.c_str(), base_name.c_str(),
                 r.ttft_p90_s > 0 ? base.ttft_p90_s / r.ttft_p90_s : 0.0,
                 base.throughput_tokens_per_s > 0 ? r.throughput_tokens_per_s / base.throughput_tokens_per_s : 0.0);
  };
  // Policies against the first, each with pulls as the first ran; pulls
  // on against off for the same policy.
  const size_t per_policy = o.pulls.size() * o.lora_aware.size();
  for (size_t k = per_policy; k < run.results.size(); k += per_policy) {
    compare(RunName(run.results[k], run.pulls[k]), run.results[k], RunName(run.results[0], run.pulls[0]),
            run.results[0]);
  }
  for (size_t k = 0; k < run.results.size(); ++k) {
    const size_t first = k - k % per_policy;
    if (run.pulls[k].on && !run.pulls[first].on) {
      compare(RunName(run.results[k], run.pulls[k]), run.results[k], "pulls off", run.results[first]);
    }
    // Placing by adapter residency against not, for the same policy and pulls.
    if (o.lora_aware.size() == 2 && k % 2 == 1) {
      compare(RunName(run.results[k - 1], run.pulls[k - 1]), run.results[k - 1], RunName(run.results[k], run.pulls[k]),
              run.results[k]);
    }
  }
}

nlohmann::json ToJson(const SimResult& r) {
  return {{"requests", r.requests},
          {"finished", r.finished},
          {"ttft_p50_s", r.ttft_p50_s},
          {"ttft_p90_s", r.ttft_p90_s},
          {"ttft_p99_s", r.ttft_p99_s},
          {"throughput_tokens_per_s", r.throughput_tokens_per_s},
          {"hit_ratio", r.hit_ratio},
          {"lower_tier_hit_ratio", r.lower_tier_hit_ratio},
          {"tokens_computed", r.tokens_computed},
          {"max_running", r.max_running},
          {"mean_running", r.mean_running},
          {"preemptions", r.preemptions},
          {"makespan_s", r.makespan_s},
          {"tokens_served", r.tokens_served},
          {"pull_decisions", r.pull_decisions},
          {"pulls", r.pulls},
          {"blocks_pulled", r.blocks_pulled},
          {"pulled_blocks_hit", r.pulled_blocks_hit},
          {"pulls_declined", r.pulls_declined},
          {"itl_p99_s", r.itl_p99_s},
          {"goodput_share", r.goodput_share},
          {"lora_admissions", r.lora_admissions},
          {"lora_slot_hit_ratio", r.lora_slot_hit_ratio},
          {"lora_loads", r.lora_loads},
          {"lora_waits", r.lora_waits},
          {"audit", r.audit}};
}

// --rate given: the load that makes, from the mean request (the load a
// trace at load 1 offers scales linearly).
double EffectiveLoad(const Flags& o, const ClusterShape& cluster, double load) {
  if (!(o.rate > 0)) return load;
  const Workload probe = BuildWorkload(o.workload, 1.0, cluster);
  double tokens = 0;
  for (const SimRequest& r : probe.requests) tokens += static_cast<double>(r.prompt_tokens() + r.answer.size());
  return o.rate * tokens / static_cast<double>(probe.requests.size()) / probe.offered_rate;
}

// Every policy (each with every pull setting) on one trace.
absl::Status RunPolicies(const Flags& o, SimOptions sim, double load, FILE* table, nlohmann::json& by_workers) {
  const auto start = std::chrono::steady_clock::now();
  const Workload workload = BuildWorkload(o.workload, load, sim.cluster);
  Run run{.workers = sim.cluster.workers, .load = load, .oracle = OracleHitRatio(workload, sim.cluster)};
  for (router::Policy policy : o.policies) {
    sim.policy = policy;
    for (const Flags::PullSetting& pull : o.pulls) {
      sim.peer_pull = pull.on;
      if (pull.on) sim.network_gbps = pull.gbps;
      for (bool aware : o.lora_aware) {
        sim.lora_aware = aware;
        ASSIGN_OR_RETURN(SimResult r, Simulate(workload, sim));
        if (o.workload.adapters > 0 && !aware) r.policy += " (adapters unaware)";
        run.results.push_back(std::move(r));
        run.pulls.push_back(pull);
      }
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintRun(o, run, table);
  nlohmann::json& entry = by_workers[std::to_string(run.workers)][absl::StrCat(load)];
  entry["oracle_hit_ratio"] = run.oracle.bound;
  entry["oracle_capacity_estimate"] = run.oracle.capacity_estimate;
  for (size_t k = 0; k < run.results.size(); ++k) {
    const SimResult& r = run.results[k];
    entry[run.pulls[k].on ? absl::StrCat(r.policy, "+pulls_", run.pulls[k].gbps, "gbps") : r.policy] = ToJson(r);
  }
  return absl::OkStatus();
}

// Every --prefill-workers entry on one trace, with the first policy and
// peer pulls on over links of `gbps` (the handoff is a pull; aggregated
// runs with them too, as the router's default).
absl::StatusOr<RolesRun> RunRoles(const Flags& o, SimOptions sim, double load, double gbps) {
  const auto start = std::chrono::steady_clock::now();
  const Workload workload = BuildWorkload(o.workload, load, sim.cluster);
  RolesRun run{.workers = sim.cluster.workers, .load = load, .network_gbps = gbps, .specs = o.roles};
  sim.policy = o.policies.front();
  sim.peer_pull = true;
  sim.network_gbps = gbps;
  for (const RolesSpec& spec : o.roles) {
    ASSIGN_OR_RETURN(sim.prefill_workers, spec.PrefillWorkers(sim.cluster.workers));
    ASSIGN_OR_RETURN(SimResult r, Simulate(workload, sim));
    run.prefill_workers.push_back(sim.prefill_workers);
    run.results.push_back(std::move(r));
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

absl::Status Main(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(Flags o, ReadFlags(args));
  FILE* table = o.json ? stderr : stdout;
  const ClusterShape& c = o.sim.cluster;
  std::fprintf(table,
               "placement_sim: %s, %lld requests, seed %llu; step model %s (a %.4g s, b %.4g s/token, c %.4g "
               "s/KV token read), peak %.0f tokens/s a worker; KV %lld tokens a worker, max_num_seqs %d, "
               "max_num_batched_tokens %d; router %.1f ms, load reports %.1f ms, KV events every %.0f ms + %.1f ms\n",
               WorkloadName(o.workload.kind).c_str(), static_cast<long long>(o.workload.requests),
               static_cast<unsigned long long>(o.workload.seed), c.model.name.c_str(), c.model.a, c.model.b, c.model.c,
               c.PeakTokensPerSecond(), static_cast<long long>(c.kv_tokens), c.max_num_seqs, c.max_num_batched_tokens,
               o.sim.router_ms, o.sim.load_delay_ms, o.sim.event_flush_ms, o.sim.event_delay_ms);
  if (o.crossover || AnyPulls(o) || !o.roles.empty()) PrintCrossover(o, table);
  if (o.crossover) return absl::OkStatus();
  nlohmann::json json = nlohmann::json::object();
  nlohmann::json& by_workers = json[WorkloadName(o.workload.kind)];
  const std::vector<double> loads = o.rate > 0 ? std::vector<double>{0} : o.loads;
  std::vector<RolesRun> roles_runs;
  for (int64_t workers : o.workers) {
    for (double load : loads) {
      SimOptions sim = o.sim;
      sim.cluster.workers = static_cast<int32_t>(workers);
      const double effective = EffectiveLoad(o, sim.cluster, load);
      if (o.roles.empty()) {
        RETURN_IF_ERROR(RunPolicies(o, sim, effective, table, by_workers));
        continue;
      }
      for (double gbps : o.network_gbps) {
        ASSIGN_OR_RETURN(RolesRun run, RunRoles(o, sim, effective, gbps));
        PrintRolesRun(run, sim, table);
        by_workers[std::to_string(workers)][absl::StrCat(effective)][absl::StrCat(gbps, "gbps")] = RolesJson(run);
        roles_runs.push_back(std::move(run));
      }
    }
  }
  if (!roles_runs.empty()) PrintRolesSummary(roles_runs, o.sim, table);
  if (o.json) std::printf("%s\n", json.dump().c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::bench::placement_sim

int main(int argc, char** argv) {
  const absl::Status s = kvfleet::bench::placement_sim::Main(std::vector<std::string>(argv + 1, argv + argc));
  if (absl::IsCancelled(s)) {
    std::printf("%s", std::string(s.message()).c_str());
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "placement_sim: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
