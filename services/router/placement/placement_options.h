// The router's placement policies and their tuning (docs/design.md, Placement).
// Every default is explained in README.md in this folder; the router's flags
// map one to one onto these fields.
//
// Thread-safety: plain values.
//
//   ASSIGN_OR_RETURN(Policy policy, ParsePolicy(flag_value));  // "prefix_aware"
//   PlacementOptions options{.policy = policy, .decision_memory = std::chrono::seconds(2)};
//   RETURN_IF_ERROR(options.Validate());
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvfleet::router {

enum class Policy {
  kPrefixAware,  // lowest cost: uncached prefill + decode load (+ KV pressure), with memory and guard
  kLeastLoaded,  // fewest requests (running + waiting + sent but not yet reported)
  kRoundRobin,   // the next live worker in worker-id order
};

// "prefix_aware", "least_loaded", "round_robin"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Policy> ParsePolicy(std::string_view name);
// The inverse of ParsePolicy (also the value of a metric label).
std::string_view PolicyName(Policy policy);

struct PlacementOptions {
  Policy policy = Policy::kPrefixAware;

  // cost(w) = prefill_weight · uncached_prefill_blocks(w)
  //         + decode_weight · decode_load_blocks(w) + KV pressure penalty.
  double prefill_weight = 1.0;  // a
  double decode_weight = 0.5;   // b
  // Fraction of a worker's blocks in use (after this request) above which
  // each further block costs kv_pressure_weight more.
  double kv_pressure_threshold = 0.9;
  double kv_pressure_weight = 4.0;

  // How long the router trusts its own decisions as "worker w holds this
  // prefix" before the worker's KV events say so: as long as the prefill is
  // predicted to take on that worker, ((the request's uncached tokens + the
  // worker's pending prefill) / its measured prefill rate) ×
  // decision_memory_prefill_factor + decision_memory_min, at most
  // decision_memory_max; decision_memory while the rate is unknown. 0
  // decision_memory turns the memory off.
  std::chrono::milliseconds decision_memory{5000};
  std::chrono::milliseconds decision_memory_min{1000};
  double decision_memory_prefill_factor = 2.0;
  std::chrono::milliseconds decision_memory_max{600000};
  // Entries of the decision memory's expiry heap at most (one per (block
  // hash, worker) pair it remembers, plus retracted ones not yet popped);
  // the soonest to expire go first.
  int64_t memory_max_blocks = int64_t{1} << 18;
  // A decision counts as load the worker has not reported yet until a load
  // report from the worker includes it (the report's admitted ticket) or the
  // request ends; this is only the bound for a report that never comes. 0
  // turns in-flight accounting off.
  std::chrono::milliseconds in_flight_window{60000};
  // In-flight decisions remembered at most; the oldest go first.
  int64_t max_in_flight = int64_t{1} << 16;

  // Affinity guard (prefix_aware only): the cheapest worker is skipped for
  // the cheapest non-overloaded one when it holds part of the prefix and
  //   load(w) - min_load > affinity_guard_margin  and  load(w) > affinity_guard_ratio · min_load,
  // or when its batch is full (max_num_seqs known) while another worker has
  // room. load = running + waiting + in-flight requests.
  bool affinity_guard = true;
  int32_t affinity_guard_margin = 16;
  double affinity_guard_ratio = 2.0;

  // Peer prefix fetch (prefix_aware only): a candidate that holds less of
  // the prompt than another worker may pull the difference from it, priced
  // at the candidate's measured pull time per block against its measured
  // prefill time per block. Until it has pulled, a block's bytes over
  // peer_pull_assumed_bytes_per_second stand in for the pull time.
  bool peer_pull = true;
  double peer_pull_assumed_bytes_per_second = 1e9;

  // LoRA adapters: a candidate whose device slots do not hold the request's
  // adapter pays the worker's measured slot load time, in prefill blocks;
  // this many seconds until the worker has measured one.
  double lora_load_assumed_seconds = 0.01;

  // This router's id in the tickets it sends workers; 0: a random one.
  uint64_t router_instance = 0;

  absl::Status Validate() const;
};

}  // namespace kvfleet::router
