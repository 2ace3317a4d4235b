// Whether the router splits a request's prefill from its decode
// (disaggregated serving, docs/architecture.md "A split request"): a prefill
// worker computes the prompt and its first token, then a decode worker
// pulls the prompt's KV from it and continues. Splitting separates time to
// first token from inter-token latency (a long prefill no longer shares
// steps with other streams' decode tokens); it does not raise throughput,
// so it is worth a transfer only when the prompt's uncached part is long.
//
// The rule, given the decode-capable worker placement would choose on its own:
//   uncached = prompt tokens - (its matched + pulled blocks) · block size
//   split when a prefill worker is live, uncached >= min_uncached_tokens,
//   and pulling a block at the link rate is priced below computing it on
//   that worker (cost_model.h, HandoffPullBlockCost: not the measured pull
//   time, which queueing inflates; unknown rates do not block a split).
//
// Thread-safety: pure functions.
//
//   SplitVerdict v = DecideSplit(split, placement_options, request, decision, decode_worker, true);
//   if (v.split) { /* prefill on a prefill worker, then hand off */ }
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "services/router/placement/decision.h"
#include "services/router/placement/placement_input.h"
#include "services/router/placement/placement_options.h"

namespace kvfleet::router {

struct SplitOptions {
  bool enabled = true;                 // --no-split turns it off
  int32_t min_uncached_tokens = 2048;  // --split-min-uncached-tokens

  absl::Status Validate() const;
};

enum class SplitReason {
  kLongUncached,     // split: the uncached prompt is long
  kShort,            // whole: the uncached prompt is under the threshold (or cached)
  kNoPrefillWorker,  // whole: no prefill worker is live (or all were tried)
  kPullPricedOut,    // whole: pulling at the link rate is no faster than computing on the decode worker
  kDisabled,         // whole: --no-split
};

// "long_uncached", "short", "no_prefill_worker", "pull_priced_out", "disabled".
std::string_view SplitReasonName(SplitReason reason);

struct SplitVerdict {
  bool split = false;
  SplitReason reason = SplitReason::kShort;
  int32_t uncached_tokens = 0;  // at the decode worker placement chose
};

// `decode` is placement's decision among the decode-capable workers and
// `decode_worker` the candidate it chose.
SplitVerdict DecideSplit(const SplitOptions& split, const PlacementOptions& placement, const PlacementRequest& request,
                         const Decision& decode, const WorkerCandidate& decode_worker, bool prefill_worker_live);

}  // namespace kvfleet::router
