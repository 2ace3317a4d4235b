// The requests a load run sends: read from a JSONL workload file or made by
// a seeded generator of random-token prompts.
//
// Owns only value types. Invariants of a returned workload: every request
// has at least one prompt token, token ids >= 0, max_tokens >= 1 and
// temperature >= 0. The generator is deterministic: the same options give
// the same requests on every platform (it uses std::mt19937_64 and its own
// range reduction, not the implementation-defined std distributions).
// Thread-safety: free functions over values; safe from any thread.
//
//   ASSIGN_OR_RETURN(std::vector<LoadRequest> reqs, ReadWorkloadFile("chat.jsonl"));
//   ASSIGN_OR_RETURN(reqs, GenerateWorkload({.num_requests = 64, .vocab_size = 49152}));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::load {

struct LoadRequest {
  std::vector<int32_t> prompt_token_ids;
  int32_t max_tokens = 0;
  float temperature = 0.0f;      // 0: greedy
  std::optional<uint64_t> seed;  // sampling seed; unset: the worker picks one
  bool ignore_eos = false;
};

// One JSON object per line:
//   {"prompt_token_ids":[1,2,3],"max_tokens":64,"temperature":0,"seed":7,"ignore_eos":true}
// prompt_token_ids and max_tokens are required; the rest default to greedy,
// no seed, stop at end of turn. Blank lines are skipped. Unknown fields are
// errors (a typo must not silently become a default). Errors name the line
// number and the field.
absl::StatusOr<std::vector<LoadRequest>> ParseWorkloadJsonl(const std::string& text);

// Reads and parses a JSONL workload file; an empty workload is an error.
absl::StatusOr<std::vector<LoadRequest>> ReadWorkloadFile(const std::string& path);

struct GeneratorOptions {
  int32_t num_requests = 1;
  int32_t prompt_tokens = 128;       // per request, shared prefix included
  int32_t shared_prefix_tokens = 0;  // identical leading tokens in every request
  int32_t max_tokens = 128;
  int32_t vocab_size = 0;  // required: ids are drawn below it
  // Ids are drawn from [min_token_id, vocab_size), skipping the low ids
  // where vocabularies keep control tokens. Clamped to vocab_size / 2 so a
  // tiny test vocabulary still works.
  int32_t min_token_id = 100;
  uint64_t seed = 0;  // of the prompts; request i samples with seed + i
  float temperature = 0.0f;
  bool ignore_eos = false;  // true: every request generates max_tokens

  absl::Status Validate() const;
};

// Prompts of random tokens: the same shared prefix in every request, then
// tokens of its own. Deterministic in the options.
absl::StatusOr<std::vector<LoadRequest>> GenerateWorkload(const GeneratorOptions& options);

}  // namespace kvfleet::load
