// Turns one row of logits into the next token, for one request.
//
// Order of operations (as vLLM and Hugging Face do): repetition penalty over
// prompt and output tokens, presence and frequency penalties over output
// tokens; then greedy argmax (ties → lowest id) when temperature is 0;
// otherwise temperature, top-k, top-p, min-p, and one draw from a
// counter-based RNG keyed by (seed, position) — so a seeded request samples
// the same tokens however it is batched or scheduled.
//
// Thread-safety: a Sampler is per request and used by one thread.
//
//   Sampler s(params, seed, prompt_tokens);
//   TokenId next = s.Sample(logits_row, position);
//   s.Accept(next);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "engine/sampler/sampling_params.h"
#include "model/token_id.h"

namespace kvfleet::engine {

class Sampler {
 public:
  // params must have passed Validate(); `seed` is params.seed or one the
  // engine drew for the request.
  Sampler(const SamplingParams& params, uint64_t seed, std::span<const model::TokenId> prompt);

  // `position` is the sequence position the sampled token will occupy.
  model::TokenId Sample(std::span<const float> logits, int64_t position) const;

  // Records an output token for the penalties.
  void Accept(model::TokenId token);

  // Logits after penalties (and temperature when sampling): what Sample draws
  // from. Exposed for logprobs and speculative verification.
  void AdjustLogits(std::span<float> logits) const;

 private:
  // Whether AdjustLogits changes anything (false for plain greedy decoding).
  bool AdjustsLogits() const;

  SamplingParams params_;
  uint64_t seed_;
  absl::flat_hash_set<model::TokenId> prompt_tokens_;
  absl::flat_hash_map<model::TokenId, int32_t> output_counts_;
};

}  // namespace kvfleet::engine
