// What the placement policy decides from: the request's prompt blocks and
// one WorkerCandidate per live worker of the model, as the router sees it at
// decision time. The router fills a WorkerCandidate from the cachemanager's
// FindOverlaps answer (one WorkerOverlap per live worker: matched_blocks and
// its last load report) and, for max_num_seqs, from the worker's GetInfo.
// Plain values: no gRPC, no proto.
//
//   PlacementRequest request{.block_hashes = HashFullBlocks(root, tokens, 16),
//                            .prompt_tokens = static_cast<int32_t>(tokens.size()), .block_size = 16};
//   WorkerCandidate c{.worker_id = "w0", .endpoint = "10.0.0.5:50051", .matched_blocks = 12,
//                     .load = {.running = 3, .blocks_total = 1000}};
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/block_hash.h"
#include "common/worker_load.h"
#include "services/router/placement/placement_options.h"

namespace kvfleet::router {

struct WorkerCandidate {
  std::string worker_id;  // stable across the worker's restarts
  std::string endpoint;
  // Leading blocks of the request it holds in any KV tier, from the
  // cachemanager's index, and of those how many sit in host memory and on
  // disk (the rest are on its device). Clamped to [0, block_hashes.size()].
  int32_t matched_blocks = 0;
  int32_t host_blocks = 0;
  int32_t disk_blocks = 0;
  // Its last load report (negative values count as 0). blocks_total 0 means
  // it has not reported yet: no KV pressure is assumed. A draining worker
  // is never chosen. Its measured prefill rate (0: unknown) sets how long
  // the router remembers sending it a prefix (as long as computing it
  // should take) and, with its measured per-tier load times, what a
  // lower-tier hit costs.
  WorkerLoad load;
  int32_t max_num_seqs = 0;  // its batch limit; 0: unknown
  // The report's newest ticket of this router (Placement::router_instance)
  // that the worker admitted: decisions up to it are in the figures above,
  // so the router stops counting them as in flight. 0: none or unknown.
  uint64_t admitted_ticket = 0;
  // Where other workers can pull its KV blocks from (GetInfo); empty: it
  // serves none.
  std::string kv_transfer_endpoint;
  // Under a LoRA adapter: whether its device slots hold it now, and its
  // measured mean seconds to put one there (0: not measured yet).
  bool lora_resident = true;
  double lora_load_seconds = 0.0;
};

// The prefill worker of a split request, holding the prompt's KV under a
// lease for the decode worker's pull (split_policy.h).
struct HandoffSource {
  std::string worker_id;
  std::string endpoint;                    // its KV transfer address
  int32_t blocks = 0;                      // the prompt's leading full blocks it holds
  double prefill_tokens_per_second = 0.0;  // its measured rate (0: unknown)
};

struct PlacementRequest {
  // common/'s HashFullBlocks of the prompt: one hash per full block, in order.
  std::vector<BlockHash> block_hashes;
  int32_t prompt_tokens = 0;
  int32_t block_size = 0;  // tokens per KV block, the workers' and the hashes'
  // Overrides PlacementOptions::policy for this request: the router asks for
  // kLeastLoaded while the cachemanager is unreachable (docs/design.md,
  // Placement).
  std::optional<Policy> policy;
  // A conversation's id (GenerationOptions.session_id; empty: none).
  // prefix_aware keeps a session on its home worker, a rendezvous hash of
  // the id over the eligible workers (the same on every router replica, no
  // shared state), unless another worker holds more of the prompt or the
  // home is over the affinity guard or cannot fit the request.
  std::string session_id;
  // Set for the decode half of a split: the peer source, whatever the
  // policy, in place of the one placement would find among the candidates
  // (the prefill worker is not one).
  std::optional<HandoffSource> handoff_source;
};

}  // namespace kvfleet::router
