// The limits table: how large each part of a request may be, one flag each,
// checked by the router before it asks a worker and again by the worker
// (which may be called directly). A request over a limit gets
// INVALID_ARGUMENT naming the field, its value and the limit, so the caller
// knows what to change; it costs the service nothing beyond the check.
//
// Transport-level limits (message and metadata size, streams per
// connection) are TransportOptions; docs/api.md lists both.
//
//   ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, WithLimitFlags(...), ...));
//   ASSIGN_OR_RETURN(o.limits, ParseRequestLimits(f));
//   RETURN_IF_ERROR(CheckGeneration(o.limits, {...}));
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "kvfleet/v1/types.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace kvfleet::limits {

struct RequestLimits {
  int64_t max_prompt_tokens = 0;  // 0: the model's context less one
  int32_t max_output_tokens = 0;  // max_tokens; 0: the model's context
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_stop_token_ids = 64;  // the engine computes at most 64
  int32_t max_top_logprobs = 20;    // the sampler computes at most 20
  int32_t max_request_id_bytes = 128;
  int32_t max_cache_salt_bytes = 256;
  int32_t max_priority = 1000;  // priority in [-max_priority, max_priority]
  int32_t max_chat_messages = 1024;
  int64_t max_prompt_bytes = 1 << 20;  // a text prompt, or a chat's message contents together
};

// `own` plus the limits' flag names, for flags::Flags::Parse.
std::set<std::string> WithLimitFlags(std::set<std::string> own);

// The limits from `f`, defaults for the absent flags; INVALID_ARGUMENT for a
// negative value or one above what the engine can compute.
absl::StatusOr<RequestLimits> ParseRequestLimits(const flags::Flags& f);

// The help lines for the limits' flags.
std::string LimitsUsage();

// The parts of a generating request both the router and the worker check.
struct GenerationFields {
  std::string_view request_id;
  std::string_view session_id;  // router only; as long as a request_id at most
  std::string_view cache_salt;
  int32_t priority = 0;
  const v1::StoppingParams* stopping = nullptr;  // required
  int32_t top_logprobs = 0;
};
absl::Status CheckGeneration(const RequestLimits& limits, const GenerationFields& fields);

// The prompt's length, max_tokens (0: the rest of the context) and both
// together within the model's context.
absl::Status CheckLength(const RequestLimits& limits, int64_t prompt_tokens, int32_t max_tokens,
                         int64_t context_length);

// Router only: what it applies itself or renders into the prompt.
absl::Status CheckStopStrings(const RequestLimits& limits, const google::protobuf::RepeatedPtrField<std::string>& stop);
absl::Status CheckPromptBytes(const RequestLimits& limits, std::string_view field, int64_t bytes);
absl::Status CheckChatMessages(const RequestLimits& limits, int64_t count);

}  // namespace kvfleet::limits
