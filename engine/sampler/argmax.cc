#include "engine/sampler/argmax.h"

#include <cmath>
#include <cstddef>

namespace kvfleet::engine {

model::TokenId Argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  // The largest value: 16 independent lanes, each keeping its value unless
  // a later one is larger (a NaN never is), all seeded with a real logit so
  // no lane can hold a NaN. The comparison is the one std::max_element
  // makes; the lanes only reorder which pairs are compared.
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  for (float& l : lane) l = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = lane[j] < logits[i + j] ? logits[i + j] : lane[j];
  }
  float best = lane[0];
  for (size_t j = 1; j < kLanes; ++j) best = best < lane[j] ? lane[j] : best;
  for (; i < n; ++i) best = best < logits[i] ? logits[i] : best;
  // Its first index (−0 and +0 compare equal, as they do for max_element).
  size_t first = 0;
  while (!(logits[first] == best)) ++first;
  return static_cast<model::TokenId>(first);
}

}  // namespace kvfleet::engine
