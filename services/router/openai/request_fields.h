// The OpenAI request parser's parts: reading typed fields out of a JSON
// body (each error an INVALID_ARGUMENT whose payload names the field), and
// the readers of the chat extensions (tools, tool calls, template kwargs,
// structured outputs, logit bias). Internal to this folder; openai_request.h
// is the interface.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"
#include "services/router/openai/openai_request.h"

namespace kvfleet::router::openai {

// Ordered, as Python reads JSON: a tool schema reaches the template with its
// keys in the client's order.
using Json = nlohmann::ordered_json;

inline constexpr char kParamPayload[] = "type.kvfleet.dev/openai.param";

// INVALID_ARGUMENT with `param` as the field OpenAI's error body names.
absl::Status Bad(const std::string& param, const std::string& message);
absl::Status WrongType(const std::string& param, const char* wanted, const Json& got);
// The field, or nullptr when absent or null (OpenAI treats null as unset).
const Json* Field(const Json& object, const char* name);
absl::StatusOr<std::optional<double>> Number(const Json& object, const char* name);
absl::StatusOr<std::optional<int64_t>> Integer(const Json& object, const char* name);
absl::StatusOr<std::optional<bool>> Bool(const Json& object, const char* name);
absl::StatusOr<std::optional<std::string>> String(const Json& object, const char* name);
// An int32 field within [min, max].
absl::StatusOr<std::optional<int32_t>> Bounded(const Json& object, const char* name, int64_t min, int64_t max);
absl::StatusOr<int32_t> TokenId(const Json& v, const std::string& param);

// Chat extensions (request_extensions.cc).
absl::Status ReadToolCalls(const Json& calls, const std::string& at, v1::ChatMessage& message);
absl::Status ReadTools(const Json& body, v1::ChatRequest& chat);
absl::Status ReadToolChoice(const Json& body, v1::ChatRequest& chat);
absl::Status ReadTemplateKwargs(const Json& body, v1::ChatRequest& chat);
absl::Status ReadConstraint(const Json& body, v1::GenerationOptions& options);
absl::Status ReadLogitBias(const Json& body, v1::SamplingParams& sampling);
// The body's `messages` and `tools` as the template sees them
// (SentConversation); call after they were read and checked.
SentConversation SentAsTemplateSees(const Json& body);

}  // namespace kvfleet::router::openai
