// The hard bounds of one generation request, shared by the engine (its
// sampler sizes its work by them) and the services' request limits (which
// refuse a request past them before it reaches a worker, and whose flags
// may only lower them).
#pragma once

#include <cstdint>

namespace kvfleet {

// Alternatives per position a request may ask log-probabilities of.
inline constexpr int32_t kMaxTopLogprobs = 20;
// Token ids a request may name as its own stop tokens.
inline constexpr int32_t kMaxStopTokenIds = 64;

}  // namespace kvfleet
