// The engine's counters and gauges, as later exported to Prometheus.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/kv/kv_leases.h"
#include "engine/lora/lora_stats.h"

namespace kvfleet::engine {

// Cumulative counters of one speculative proposer.
struct SpeculationStats {
  std::string proposer;
  int64_t drafted_tokens = 0;    // guesses verified
  int64_t accepted_tokens = 0;   // of those, kept
  int64_t verify_passes = 0;     // request-steps that verified a draft
  double propose_seconds = 0.0;  // spent proposing
  int64_t memory_bytes = 0;      // the proposer's own memory on the host (the suffix store)
  // Tokens per verify pass over its cost next to a plain step, at one
  // stream, from the learnt step cost (0 before any pass).
  double estimated_speedup = 0.0;
};

// KV copied from peer workers (engine/kv/transfer), counts since start.
struct KvPeerStats {
  int64_t pulls_done = 0;     // every block asked for arrived
  int64_t pulls_partial = 0;  // the peer held fewer: the rest computed here
  int64_t pulls_failed = 0;   // refused, cut off, damaged or late: computed here
  // The failed ones by reason: the pull's status code ("unavailable",
  // "data_loss", "failed_precondition", ...) or "cache_full".
  std::map<std::string, int64_t> failed_by_reason;
  int64_t blocks_pulled = 0;  // committed into this cache
  int64_t bytes_pulled = 0;
  double pull_seconds = 0.0;  // from asking to the blocks' arrival, summed
  // Seconds per block of the recent pulls that brought any (each pull's
  // time over its blocks, smoothed): what the router prices a pull by.
  double seconds_per_block = 0.0;
  int64_t pulls_served = 0;  // ExportKvBlocks calls answered
  int64_t blocks_served = 0;
  int64_t bytes_served = 0;
};

struct EngineStats {
  int32_t running = 0;
  int32_t waiting = 0;  // inbox included
  int32_t blocks_total = 0;
  int32_t blocks_used = 0;    // held by requests
  int32_t blocks_cached = 0;  // free but reusable by prefix hash
  int32_t blocks_free = 0;    // allocatable (cached included)
  // Prompt tokens not yet computed (PendingPrefill): a prefix shared by
  // several requests counts once and a cached one not at all. Requests still
  // in the inbox are included (compared only with the active requests'
  // prompts: the cache is the engine thread's), so a burst that arrives
  // during a long step is seen before the step ends.
  int64_t pending_prefill_tokens = 0;
  // Tokens per second of steps that prefilled (decode rows included: they
  // share the step), smoothed; 0 until the first such step.
  double prefill_tokens_per_second = 0.0;
  // Mean seconds to bring one block back from each lower KV tier
  // (kv/tiers), 0 with no such tier or before its first load.
  double host_load_seconds_per_block = 0.0;
  double disk_load_seconds_per_block = 0.0;
  int64_t prefix_queried_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t last_step_tokens = 0;
  // Allocated-but-unfilled token slots over allocated slots, across the
  // blocks of running requests: the memory paging wastes.
  double kv_waste = 0.0;
  // Seconds steps waited after their forward pass for constrained requests'
  // masks (MaskPrefetcher): the mask time the forward pass did not hide.
  double mask_wait_seconds = 0.0;
  // LoRA adapters: the executor's slots' counters, and the identities
  // ("name@digest") of the adapters in them now.
  LoraResidencyStats lora;
  std::vector<std::string> resident_lora;
  int64_t kv_block_bytes = 0;                 // one block's bytes as a peer receives it
  std::vector<SpeculationStats> speculation;  // one per loaded proposer
  KvPeerStats kv_peer;
  // Prefill blocks held for a decode worker's pull (kv/kv_leases.h).
  int32_t kv_leases = 0;
  int32_t kv_leased_blocks = 0;
  KvLeaseCounters kv_lease_counters;
};

}  // namespace kvfleet::engine
