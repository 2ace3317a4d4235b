// Runs one request to completion on a model executor: chunked prefill of the
// prompt, then one decode step per token, with the sampler and the stopping
// rules. This is the path of `kvfleet generate` and of the reference tests;
// the continuous-batching engine serves many requests through the same
// executor and sampler.
//
// Thread-safety: one thread at a time; uses the executor exclusively.
//
//   SimpleGenerator gen(*executor);
//   ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(request, [](TokenId t) { ... }));
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/token_id.h"
#include "services/worker/engine/executor/model_executor.h"
#include "services/worker/engine/finish_reason.h"
#include "services/worker/engine/sampler/sampling_params.h"

namespace kvfleet::engine {

struct GenerateRequest {
  std::vector<model::TokenId> prompt;
  SamplingParams sampling;
  StoppingParams stopping;
  std::vector<model::TokenId> end_of_turn_tokens;  // the model's own (EOS, <|im_end|>, ...)
  int32_t prefill_chunk_tokens = 512;              // bounds activation memory for long prompts
};

struct GenerateResult {
  std::vector<model::TokenId> tokens;
  FinishReason finish_reason = FinishReason::kLength;
  uint64_t seed = 0;  // the seed used (drawn when the request had none)
  double prefill_seconds = 0;
  double decode_seconds = 0;  // from the first token to the last
};

class SimpleGenerator {
 public:
  explicit SimpleGenerator(ModelExecutor& executor) : executor_(executor) {}

  // on_token is called for every generated token as soon as it is sampled
  // (including a final stop token). INVALID_ARGUMENT when the prompt is empty,
  // a parameter is out of range, or prompt + max_tokens exceeds the context
  // or the KV capacity.
  absl::StatusOr<GenerateResult> Generate(const GenerateRequest& request,
                                          const std::function<void(model::TokenId)>& on_token);

 private:
  absl::Status Validate(const GenerateRequest& request) const;

  ModelExecutor& executor_;
};

}  // namespace kvfleet::engine
