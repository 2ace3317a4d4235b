// Speculative decoding's configuration: the worker's defaults and what one
// request may choose.
//
//   SpeculationOptions worker{.proposer = "ngram", .max_draft_tokens = 8};
//   SpeculationParams request{.proposer = "off"};   // this request never speculates
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvfleet::engine::spec {

inline constexpr char kProposerOff[] = "off";
// Per request and step, the loaded proposer that pays best: the lookup
// draft copied from the longest match when one matched, else the proposer
// that is not a lookup (heads, self, draft) with the best measured
// acceptance for its cost (Speculator).
inline constexpr char kProposerAuto[] = "auto";
inline constexpr int32_t kMaxDraftTokensLimit = 32;

// The worker's settings.
struct SpeculationOptions {
  // The proposer for requests that do not name one: a loaded proposer's
  // name ("ngram", "suffix", "self", "draft", "heads"), "auto" or "off".
  std::string proposer = kProposerOff;
  // Upper bound of the draft length k; a request may ask for less.
  int32_t max_draft_tokens = 8;
  // true: k per request follows its recent acceptance and the cost of a
  // verify pass at the current batch size, down to 0 (no speculation).
  // false: every request drafts max_draft_tokens (tests, experiments).
  bool adaptive = true;

  // INVALID_ARGUMENT for k outside [1, kMaxDraftTokensLimit] or a default
  // proposer that is not among `available` (nor "off").
  absl::Status Validate(const std::vector<std::string>& available) const;
};

// One request's choice.
struct SpeculationParams {
  std::string proposer;  // "": the worker's default; "off": never speculate
  // 0: the worker's. More than the worker's is capped to it: the client
  // cannot know every worker's setting.
  int32_t max_draft_tokens = 0;

  // INVALID_ARGUMENT for a proposer not among `available` (nor "off", nor
  // empty) or k outside [0, kMaxDraftTokensLimit].
  absl::Status Validate(const std::vector<std::string>& available) const;
};

}  // namespace kvfleet::engine::spec
