// Per-request sampling and stopping parameters, with the validation every
// entry point (CLI, worker, router) applies before a request reaches the
// engine. Error messages name the field and the accepted range.
//
//   SamplingParams p{.temperature = 0.7f, .top_p = 0.9f, .seed = 42};
//   RETURN_IF_ERROR(p.Validate());
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/generation_bounds.h"
#include "model/token_id.h"

namespace kvfleet::engine {

struct SamplingParams {
  float temperature = 1.0f;        // 0: greedy (argmax)
  int32_t top_k = 0;               // 0: off
  float top_p = 1.0f;              // (0, 1]; 1: off
  float min_p = 0.0f;              // [0, 1]; 0: off
  float repetition_penalty = 1.0f; // > 0; 1: off (prompt and output tokens)
  float presence_penalty = 0.0f;   // [-2, 2] (output tokens)
  float frequency_penalty = 0.0f;  // [-2, 2] (output tokens)
  std::optional<uint64_t> seed;    // unset: the engine draws one per request
  // Added to a token's logit before penalties and temperature (OpenAI's
  // logit_bias: [-100, 100]; -100 bans the token, 100 all but forces it).
  std::vector<std::pair<model::TokenId, float>> logit_bias;

  bool greedy() const { return temperature == 0.0f; }
  absl::Status Validate() const;
};


struct StoppingParams {
  int32_t max_tokens = 256;                   // >= 1
  std::vector<model::TokenId> stop_token_ids; // besides the model's own end-of-turn tokens
  bool ignore_eos = false;                    // keep going past end-of-turn tokens

  // vocab_size bounds the stop ids.
  absl::Status Validate(int64_t vocab_size) const;
};

}  // namespace kvfleet::engine
