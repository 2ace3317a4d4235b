#include "engine/sampler/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvfleet::engine {

absl::Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be >= 0 (0 means greedy), got ", temperature));
  }
  if (top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0 (0 means off), got ", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", min_p));
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be > 0 (1 means off), got ", repetition_penalty));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("presence_penalty must be in [-2, 2], got ", presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency_penalty must be in [-2, 2], got ", frequency_penalty));
  }
  if (logit_bias.size() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("logit_bias has ", logit_bias.size(), " entries; at most 1024"));
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) return absl::InvalidArgumentError(absl::StrCat("logit_bias names token ", token));
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias for token ", token, " is ", bias,
                                                     "; it must be in [-100, 100]"));
    }
  }
  return absl::OkStatus();
}

absl::Status StoppingParams::Validate(int64_t vocab_size) const {
  if (max_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 1, got ", max_tokens));
  if (stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return absl::InvalidArgumentError(absl::StrCat("stop_token_ids has ", stop_token_ids.size(),
                                                   " entries; at most ", kMaxStopTokenIds, " are allowed"));
  }
  for (model::TokenId id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_token_ids contains ", id, ", outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine
