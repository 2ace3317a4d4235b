#include "engine/sampler/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace kvfleet::engine {

absl::Status LogprobsParams::Validate() const {
  if (top_n < 0 || top_n > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", top_n));
  }
  if (top_n > 0 && !enabled) {
    return absl::InvalidArgumentError("top_logprobs needs logprobs = true");
  }
  return absl::OkStatus();
}

TokenLogprobs ComputeLogprobs(std::span<const float> logits, model::TokenId token, int32_t top_n) {
  // log_softmax in double, so the sum over a 50k vocabulary loses nothing.
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob = [&](model::TokenId t) { return static_cast<float>(static_cast<double>(logits[t]) - log_z); };

  TokenLogprobs out{.token = token, .logprob = logprob(token)};
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return out;
  std::vector<model::TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](model::TokenId a, model::TokenId b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  return out;
}

}  // namespace kvfleet::engine
