// The prefix_aware cost of placing one request on one worker (docs/design.md,
// Placement; README.md in this folder, "Cost model"), in KV blocks:
//
//   matched  = max(cachemanager's matched_blocks, router's remembered blocks)
//   new      = ceil(prompt_tokens / block_size) - matched
//   lower    = host_blocks · tier_cost(host) + disk_blocks · tier_cost(disk)
//              (matched blocks below the device; 0 when remembered > reported)
//   tier_cost(t) = min(1, load_seconds_per_block(t) / (block_size / prefill_tokens_per_second)),
//              both measured by the worker (the disk's first figure: one
//              adopted block read at start); 1 (a recompute) until measured
//   lora     = (request under a LoRA adapter not resident on the worker)
//              lora_load_seconds(w) / (block_size / prefill_tokens_per_second), measured by the worker
//              (lora_load_assumed_seconds before its first load; 1 block while its prefill rate is unknown)
//   uncached_prefill_blocks = (prompt_tokens - matched · block_size + pending_prefill_tokens) / block_size + lower
//              + lora
//   decode_load_blocks      = blocks_used + in-flight blocks + new
//   kv_penalty = kv_pressure_weight · max(0, decode_load_blocks - kv_pressure_threshold · blocks_total)
//   cost = prefill_weight · uncached_prefill_blocks + decode_weight · decode_load_blocks + kv_penalty
//
// With a peer source (the worker with a transfer address that holds the
// most leading blocks), a candidate holding fewer may pull the difference:
//   peer     = min(source's blocks, (prompt_tokens - 1) / block_size) - matched
//   pull(w)  = pull_seconds_per_block(w) / (block_size / prefill_tokens_per_second(w))
//              (measured by w over its recent pulls; kv_block_bytes / assumed
//              bandwidth before its first)
// and, when pull(w) < 1, those blocks count pull(w) each in the uncached
// prefill instead of 1 (they stay new blocks for the decode load). A split's
// prefill worker (PeerSource::handoff) is priced at its link rate instead
// (HandoffPullBlockCost), 0 while that cannot be known.
//
// Thread-safety: a pure function.
//
//   CandidateScore s = ScoreCandidate(options, request, candidate, remembered, memory.InFlightLoad(id));
#pragma once

#include <cstdint>
#include <string>

#include "services/router/placement/decision.h"
#include "services/router/placement/decision_memory.h"
#include "services/router/placement/placement_input.h"
#include "services/router/placement/placement_options.h"

namespace kvfleet::router {

// What one block in a lower tier costs, in blocks of prefill: its measured
// load time over the worker's measured time to prefill a block, at most 1;
// 1 while either is unknown (0).
double LowerTierBlockCost(double load_seconds_per_block, const WorkerLoad& load, int64_t block_size);

// The worker a candidate may pull the prompt's leading blocks from.
struct PeerSource {
  std::string worker_id;
  int32_t blocks = 0;                      // leading blocks of the prompt it holds, per the cachemanager
  double prefill_tokens_per_second = 0.0;  // its measured rate (0: unknown)
  // A split's prefill worker, holding the blocks under a lease for the
  // decode half: the pull is priced by HandoffPullBlockCost.
  bool handoff = false;
};

// What pulling one block costs a worker, in blocks of its prefill; 1 (a
// recompute) while its prefill rate (else `fallback_prefill_rate`, the
// source's: a new worker has prefilled nothing yet), or both its pull time
// and its block's bytes, are unknown. Not capped: above 1 a pull is slower
// than computing.
double PeerPullBlockCost(const PlacementOptions& options, const WorkerLoad& load, int64_t block_size,
                         double fallback_prefill_rate = 0.0);
// A split's pull from its prefill worker, in blocks of the puller's
// prefill: the block's bytes at the assumed link rate
// (peer_pull_assumed_bytes_per_second), never the measured pull time. The
// measured figure includes waiting behind other pulls, and only pulls
// update it: priced by it, a decode worker whose pulls once queued would
// never be sent a split again (the simulator showed it). 0 while the
// prefill rate or the block's bytes are unknown: such a pull is taken.
double HandoffPullBlockCost(const PlacementOptions& options, const WorkerLoad& load, int64_t block_size,
                            double fallback_prefill_rate = 0.0);

// `request` must be valid (block_size >= 1, at most prompt_tokens / block_size
// hashes); `remembered_blocks` is DecisionMemory::RememberedBlocks' answer
// for the candidate; `source` may be null (no peer to pull from). Fills
// every field but over_guard.
CandidateScore ScoreCandidate(const PlacementOptions& options, const PlacementRequest& request,
                              const WorkerCandidate& candidate, int32_t remembered_blocks,
                              DecisionMemory::InFlight in_flight, const PeerSource* source = nullptr);

}  // namespace kvfleet::router
