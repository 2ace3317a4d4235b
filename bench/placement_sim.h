// placement_sim: the router's placement policies on a simulated cluster of
// 4 to 64 workers, deterministic for a seed, in seconds (bench/README.md,
// "Placement simulator").
//
// Real parts: the router's Placement (policies, DecisionMemory, cost model,
// affinity guard) on a simulated clock, and per worker the engine's
// Scheduler + KvCacheManager + BlockPool (prefix caching on) and its
// PendingPrefill. Simulated parts: the model (a step takes
// t = a + b·tokens + c·kv_tokens_read, StepModel), the network (the
// decision reaches the worker router_ms later), the load reports (sent at
// the end of every step and on admission, visible load_delay_ms later, with
// the router's admitted ticket) and the cachemanager's index (a worker's KV
// events visible at the next event flush plus event_delay_ms, answered as
// per-worker leading matches, as FindOverlaps does).
//
// Peer KV pulls (optional): each worker then has a transfer endpoint, and a
// decision that says to pull gives the request a kv_peer; at its first
// admission try (the KvCacheManager's peer-pull hook, as in the engine) its
// worker starts the pull, cut to the free blocks, and the request waits the
// pull's time over a simulated network (PeerLinks); then the blocks are
// committed as cached, held until all are in, as the engine does.
//
// Disaggregated prefill and decode (optional, SimOptions::prefill_workers):
// some workers take the role prefill, the rest decode. The router's real
// rule (split_policy.h's DecideSplit, on placement's choice among the decode
// workers) sends a long uncached prompt to a prefill worker; its first token
// is the request's; the worker then holds the prompt under a lease (the
// engine's KvLeases) and the router places the decode half among the decode
// workers with the prefill worker as handoff_source: the decode worker pulls
// the prompt at admission, as any peer pull, and decodes the rest.
//
// The files divide the work:
//   - placement_sim_workload.cc: the five workloads and the oracle bound;
//   - placement_sim_cluster.cc (+ placement_sim_cluster.h): the event-driven
//     simulation of one policy; placement_sim_peer_pull.cc: the pulls and
//     their network; placement_sim_split.cc: roles, split and handoff;
//     placement_sim_latency.cc: TTFT, inter-token gaps, goodput;
//   - placement_sim.cc: main(), flags, the table and the JSON;
//     placement_sim_split_report.cc: the roles sweep's tables.
//
//   Workload w = BuildWorkload({.kind = WorkloadKind::kMultiTenant, .requests = 10000}, model, workers, kv_tokens);
//   SimResult r = Simulate(w, {.workers = 16, .policy = Policy::kPrefixAware});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/scheduler/scheduler.h"
#include "services/router/placement/placement_options.h"
#include "services/router/placement/split_policy.h"

namespace kvfleet::bench::placement_sim {

// Step time t = a + b·tokens + c·kv_tokens_read seconds (tokens computed in
// the step; kv_tokens_read = Σ over the step's chunks of the context they
// attend to).
struct StepModel {
  std::string name;
  double a = 0, b = 0, c = 0;
  double Seconds(int64_t tokens, int64_t kv_tokens_read) const {
    return a + b * static_cast<double>(tokens) + c * static_cast<double>(kv_tokens_read);
  }
};

// "cpu" (fitted on this machine) or "gpu" (from published figures); see
// placement_sim.cc for the numbers and where they come from.
absl::StatusOr<StepModel> NamedStepModel(const std::string& name);

enum class WorkloadKind { kMultiTenant, kMultiTurn, kHotPrefix, kNoSharing, kChatDocs };
absl::StatusOr<WorkloadKind> ParseWorkload(const std::string& name);
std::string WorkloadName(WorkloadKind kind);

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kMultiTenant;
  int64_t requests = 10000;
  uint64_t seed = 1;
  // multi-tenant: tenants, each with one shared context; questions are short.
  int64_t tenants = 150;
  int64_t context_tokens = 6000;
  int64_t question_tokens = 100;
  int64_t output_tokens = 200;
  // multi-turn: conversations of up to `turns` turns, each turn the whole
  // conversation so far plus a new question; the think time between turns.
  int64_t sessions = 1000;
  int64_t turns = 6;
  double think_seconds = 5;
  // hot-prefix: `tenants` prefixes, Zipf-distributed with this exponent.
  double zipf = 1.2;
  // chat-docs: chat turns (prompt and answer lengths uniform in these
  // ranges) and, as doc_share of the requests, documents of doc_tokens with
  // short answers; nothing shared, so every prompt is computed once.
  int64_t chat_prompt_min = 100, chat_prompt_max = 300;
  int64_t chat_output_min = 200, chat_output_max = 400;
  double doc_share = 0.2;
  int64_t doc_tokens = 3000;
  int64_t doc_output_min = 16, doc_output_max = 64;
  // LoRA adapters: > 0 puts each group's requests (tenant, session,
  // prefix) under adapter group mod adapters; 0: the base model only.
  int64_t adapters = 0;
};

// One request of the trace. Token ids are real (prefix caching hashes them);
// `answer` is what the simulated model "generates", so a later turn that
// quotes it hits the blocks this turn wrote.
struct SimRequest {
  double arrival_s = 0;
  int64_t group = -1;      // the tenant, session or prefix it shares with (-1: none)
  std::string session_id;  // multi-turn only
  int64_t adapter = -1;    // the LoRA adapter it runs under (-1: the base model)
  // The prompt is *prefix then suffix; prefixes are shared between requests
  // (a tenant's context, the conversation so far) to keep the trace small.
  std::shared_ptr<const std::vector<int32_t>> prefix;
  std::vector<int32_t> suffix;
  std::vector<int32_t> answer;

  int64_t prompt_tokens() const { return static_cast<int64_t>(prefix->size() + suffix.size()); }
  std::vector<int32_t> Prompt() const;
};

struct Workload {
  WorkloadOptions options;
  double load = 0;                   // offered / peak token rate
  double offered_rate = 0;           // prompt + output tokens per second, as if nothing were cached
  std::vector<SimRequest> requests;  // by arrival
};

// The cluster, for load and the oracle.
struct ClusterShape {
  int32_t workers = 16;
  int64_t kv_tokens = 0;  // per worker
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t admission_bypass_limit = engine::SchedulerConfig{}.admission_bypass_limit;
  StepModel model;
  // One worker's peak token rate: full steps of max_num_batched_tokens
  // (the kv term left out: it is zero at no context).
  double PeakTokensPerSecond() const { return max_num_batched_tokens / model.Seconds(max_num_batched_tokens, 0); }
  // A request's share of a worker's time at full batches: its prompt at the
  // peak rate, each answer token as one of max_num_seqs streams in a decode
  // step reading its context. The chat-docs load counts requests by it: a
  // decode step never fills max_num_batched_tokens, so counting answer
  // tokens at the peak rate understates a decode-heavy load (chat-docs'
  // defaults on the gpu model: 0.74 of this figure).
  double RequestSeconds(int64_t prompt_tokens, int64_t output_tokens) const {
    const double p = static_cast<double>(prompt_tokens), o = static_cast<double>(output_tokens);
    return p / PeakTokensPerSecond() + o * (model.a / max_num_seqs + model.b + model.c * (p + o / 2));
  }
};

// Poisson arrivals at `load` × the cluster's peak token rate (multi-turn:
// sessions start as a Poisson process, turns follow after think time;
// chat-docs: at `load` × the workers' time, by RequestSeconds).
Workload BuildWorkload(const WorkloadOptions& options, double load, const ClusterShape& cluster);

// What placement could reach on this trace (prefix tokens reused / prompt
// tokens). `bound`: every request reuses the leading full blocks any earlier
// request left behind (prompt and answer), as with unlimited KV: no
// placement beats it. `capacity_estimate`: the same, but keeping T tokens
// cached across a gap of g seconds costs T·g of the cluster's workers ×
// kv_tokens × span token-seconds and the shortest gaps go first. An exact
// bound with per-worker caches is a scheduling problem of its own; the
// estimate says roughly where the cache, not the placement, runs out.
struct OracleHitRatios {
  double bound = 0;
  double capacity_estimate = 0;
};
OracleHitRatios OracleHitRatio(const Workload& workload, const ClusterShape& cluster);

struct SimOptions {
  ClusterShape cluster;
  router::Policy policy = router::Policy::kPrefixAware;
  router::PlacementOptions placement;  // .policy is overridden by `policy`
  bool sessions = true;                // send session ids (multi-turn)
  double router_ms = 1.0;              // decision to the worker (hashing, FindOverlaps, transit)
  double load_delay_ms = 2.0;          // a load report to the router
  double event_flush_ms = 50.0;        // the worker's KV event flush
  double event_delay_ms = 2.0;         // a flushed event batch to the index
  // KV tiers below each worker's device cache, in tokens (0: none), and
  // the bandwidth a block loads back at; a load adds its time to the step
  // that needs it (never free, never overlapped: conservative).
  int64_t host_tier_tokens = 0;
  double host_gb_per_s = 25.0;
  int64_t disk_tier_tokens = 0;
  double disk_gb_per_s = 3.0;
  int64_t kv_bytes_per_token = 131072;  // Llama-3-8B, float16: 32 layers x 8 kv heads x 128 x 2 x 2
  // Peer KV pulls: workers get transfer endpoints and report kv_block_bytes
  // (from kv_bytes_per_token), and the router's placement.peer_pull follows
  // this switch. Each worker's network link carries network_gbps each way;
  // a pull takes pull_latency_ms and then its bytes at that rate once the
  // source's sending side and the puller's receiving side are free.
  // The router prices a worker's first pull at peer_pull_assumed_gbps (its
  // --peer-pull-bandwidth, overriding placement's field; 0: network_gbps,
  // as an operator who knows the link sets it; 8 is the router's default),
  // its later ones at what the worker measured.
  bool peer_pull = false;
  double network_gbps = 100;
  double pull_latency_ms = 1.0;
  double peer_pull_assumed_gbps = 0;
  // Worker roles: the first prefill_workers are prefill workers, the rest
  // decode workers (0: every worker both, nothing split). The handoff is a
  // peer pull: roles need peer_pull on. lease_seconds: the engine's
  // kv_lease_duration (a lease also ends when its pull is done).
  int32_t prefill_workers = 0;
  router::SplitOptions split;
  double lease_seconds = 30;
  bool split_stream_first_token = false;  // the router's --split-stream-first-token
  // Goodput: a request is good when its TTFT and its own p99 inter-token
  // gap (nearest rank; none for a single token) are within these.
  double ttft_objective_s = 1.0;
  double itl_objective_s = 0.05;
  // LoRA adapters (a workload with adapters): each worker's device slots,
  // the seconds a load into one adds to the worker's next step, and
  // whether the router places by residency (its measured load time in the
  // cost) or as though every adapter were resident everywhere.
  int32_t max_loras = 4;
  double lora_load_ms = 20.0;
  bool lora_aware = true;
};

struct SimResult {
  std::string policy;
  int64_t requests = 0, finished = 0;
  double ttft_p50_s = 0, ttft_p90_s = 0, ttft_p99_s = 0;
  double throughput_tokens_per_s = 0;        // prompt + output tokens served / makespan
  double hit_ratio = 0;                      // cached prompt tokens at admission / prompt tokens, any tier
  double lower_tier_hit_ratio = 0;           // of hit_ratio, loaded back from host or disk (lookups that admitted)
  int64_t tokens_computed = 0;               // every token the workers computed, recomputation included
  double max_running = 0, mean_running = 0;  // per worker, time-averaged running requests: max over workers, mean
  int64_t preemptions = 0;
  double makespan_s = 0;
  int64_t tokens_served = 0;  // prompt + output tokens of the finished requests
  // Peer pulls: decisions that said to pull, pulls started (at the
  // request's first admission try, the source still holding blocks the
  // worker lacked and the worker having free blocks), blocks committed from
  // them, of those the ones still in the request's prefix hit when it was
  // admitted, and decisions where a peer held more but the price said compute.
  int64_t pull_decisions = 0, pulls = 0, blocks_pulled = 0, pulled_blocks_hit = 0, pulls_declined = 0;
  // Every emitted token's gap since its request's previous token (the
  // first token from a prefill worker to the second from a decode worker
  // included), over all requests.
  double itl_p50_s = 0, itl_p90_s = 0, itl_p99_s = 0;
  // Shares of the requests within the TTFT objective, the inter-token one,
  // and both (goodput), and good requests per second of makespan.
  double ttft_met = 0, itl_met = 0, goodput_share = 0, goodput_per_s = 0;
  // Goodput among the requests whose prompt reaches the split threshold
  // (split.min_uncached_tokens), split or not; 0 when there are none.
  double goodput_long_share = 0;
  double requests_per_s = 0;  // finished requests per second of makespan
  // Split requests, and long ones sent whole because the decode worker's
  // measured pulls priced the handoff out; the handoff pulls (a decode
  // worker pulling a lease) and their mean seconds; the gaps between a
  // split request's first and second tokens; leases that ended unpulled
  // (at their deadline, or displaced under the half-pool bound).
  int64_t splits = 0, splits_priced_out = 0, handoff_pulls = 0;
  double handoff_pull_mean_s = 0, handoff_gap_p50_s = 0, handoff_gap_p90_s = 0;
  int64_t leases_expired = 0, leases_displaced = 0;
  std::string audit;  // empty when the block accounting balanced
  // Admissions under an adapter, of those the share that found it in a
  // slot, loads, and admission tries that found every slot in use.
  int64_t lora_admissions = 0, lora_loads = 0, lora_waits = 0;
  double lora_slot_hit_ratio = 0;
};

absl::StatusOr<SimResult> Simulate(const Workload& workload, const SimOptions& options);

// Each worker's network link as two first-come-first-served queues (what
// it sends, what it receives): a pull waits for the latency, then for both
// its source's sending side and its puller's receiving side, and holds both
// while its bytes cross. A hot source serving many pullers is its own
// bottleneck, as it would be on a real network.
class PeerLinks {
 public:
  PeerLinks(int32_t workers, double gbps, double latency_s);
  // When a pull of `bytes` from `source` to `puller` that starts at `now` ends.
  double Pull(size_t source, size_t puller, int64_t bytes, double now);

 private:
  double bytes_per_second_, latency_s_;
  std::vector<double> send_free_, receive_free_;
};

// Where a pull starts beating recomputing, priced as the router prices it
// (a block's bytes over the link rate against block_size over the worker's
// prefill rate, the step model's peak) plus the per-pull latency the router
// learns only from its measurements.
struct PullCrossover {
  double network_gbps = 0;
  double pull_seconds_per_block = 0;     // on an idle link, latency left out
  double prefill_seconds_per_block = 0;  // at the peak prefill rate
  // Blocks a pull must carry to be faster than computing them, latency
  // included; -1 when no count is (the link is slower than the prefill).
  int64_t min_blocks = -1;
  // The shortest prompt that reaches that count (a block that ends the
  // prompt is never pulled); -1: never.
  int64_t min_prompt_tokens = -1;
};
PullCrossover PullCrossoverFor(const ClusterShape& cluster, int64_t kv_bytes_per_token, double network_gbps,
                               double pull_latency_s);

}  // namespace kvfleet::bench::placement_sim
