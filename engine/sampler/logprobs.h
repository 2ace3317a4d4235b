// Log-probabilities of a sampled token (and the most likely alternatives)
// under the model's raw distribution: log_softmax of the logits before
// penalties and temperature, as vLLM and OpenAI report them.
//
//   TokenLogprobs lp = ComputeLogprobs(logits_row, sampled, /*top_n=*/5);
//   // lp.logprob <= 0; lp.top is sorted, most likely first.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/generation_bounds.h"
#include "model/token_id.h"

namespace kvfleet::engine {


struct LogprobsParams {
  bool enabled = false;
  int32_t top_n = 0;  // alternatives per position, [0, kMaxTopLogprobs]

  absl::Status Validate() const;
};

struct TokenLogprobs {
  model::TokenId token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<model::TokenId, float>> top;  // most likely first; ties → lower id
};

TokenLogprobs ComputeLogprobs(std::span<const float> logits, model::TokenId token, int32_t top_n);

}  // namespace kvfleet::engine
