// What the model's publisher suggests for generation when a request says
// nothing: Hugging Face's generation_config.json (GGUF files carry none).
// The worker and router use the end-of-sequence ids; the OpenAI-compatible
// API fills the sampling values a request leaves unset, as vLLM does.
#pragma once

#include <optional>
#include <vector>

#include "model/token_id.h"

namespace kvfleet::model {

struct GenerationDefaults {
  std::vector<TokenId> eos_token_ids;  // every id that ends a sequence, besides the vocabulary's eos
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
};

}  // namespace kvfleet::model
