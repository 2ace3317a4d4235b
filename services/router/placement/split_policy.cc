#include "services/router/placement/split_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "services/router/placement/cost_model.h"

namespace kvfleet::router {

absl::Status SplitOptions::Validate() const {
  if (min_uncached_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the split threshold must be at least 1 uncached token, got ", min_uncached_tokens));
  }
  return absl::OkStatus();
}

std::string_view SplitReasonName(SplitReason reason) {
  switch (reason) {
    case SplitReason::kLongUncached:
      return "long_uncached";
    case SplitReason::kShort:
      return "short";
    case SplitReason::kNoPrefillWorker:
      return "no_prefill_worker";
    case SplitReason::kPullPricedOut:
      return "pull_priced_out";
    case SplitReason::kDisabled:
      return "disabled";
  }
  return "unknown";
}

SplitVerdict DecideSplit(const SplitOptions& split, const PlacementOptions& placement, const PlacementRequest& request,
                         const Decision& decode, const WorkerCandidate& decode_worker, bool prefill_worker_live) {
  SplitVerdict v;
  const int32_t pulled = decode.peer_pull.has_value() ? decode.peer_pull->blocks - decode.matched_blocks : 0;
  const int64_t held_tokens = int64_t{decode.matched_blocks + std::max(pulled, 0)} * request.block_size;
  v.uncached_tokens = static_cast<int32_t>(std::max<int64_t>(request.prompt_tokens - held_tokens, 0));
  if (!split.enabled) {
    v.reason = SplitReason::kDisabled;
  } else if (!prefill_worker_live) {
    v.reason = SplitReason::kNoPrefillWorker;
  } else if (v.uncached_tokens < split.min_uncached_tokens) {
    v.reason = SplitReason::kShort;
  } else if (HandoffPullBlockCost(placement, decode_worker.load, request.block_size) >= 1.0) {
    v.reason = SplitReason::kPullPricedOut;
  } else {
    v.split = true;
    v.reason = SplitReason::kLongUncached;
  }
  return v;
}

}  // namespace kvfleet::router
