// The OpenAI-compatible HTTP API's request bodies, turned into the public
// API's own requests (proto/kvfleet/v1/inference.proto): /v1/chat/completions
// into a ChatRequest, /v1/completions into a GenerateTextRequest, vLLM's
// /tokenize and /detokenize into theirs. JSON in, protos out; no network.
//
// What is accepted is the table in docs/api.md ("OpenAI-compatible HTTP").
// Unknown fields are ignored, as other servers do (clients send `n: 1`,
// `tool_choice: null`, `metadata`); a known field this server does not
// implement is refused only when it asks for something (`n` > 1, tools,
// a JSON response format, a logit bias), naming the field. Defaults are
// OpenAI's (temperature 1), not the gRPC API's (greedy).
//
// Errors are INVALID_ARGUMENT with a message for the client and the
// offending field as the status's `param` payload (ErrorParam), which the
// error body carries as OpenAI's `param`.
//
//   ASSIGN_OR_RETURN(CompletionCall call, ParseCompletionCall(Endpoint::kChat, body));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"

namespace kvfleet::router::openai {

enum class Endpoint { kChat, kCompletion };

struct CompletionCall {
  Endpoint endpoint = Endpoint::kChat;
  v1::ChatRequest chat;                // kChat
  v1::GenerateTextRequest completion;  // kCompletion
  std::string model;                   // as the client named it; empty when it named none
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Logprobs in the endpoint's own shape (chat: `logprobs` and
  // `top_logprobs`; completions: `logprobs` as the count of alternatives).
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string user;  // logged only: caching by user would stop users sharing a system prompt
  // Which sampling fields the request set: the others take the model's
  // generation_config.json defaults where it has them (ApplyGenerationDefaults).
  bool temperature_set = false;
  bool top_p_set = false;
  bool top_k_set = false;

  const v1::GenerationOptions& options() const {
    return endpoint == Endpoint::kChat ? chat.options() : completion.options();
  }
};

absl::StatusOr<CompletionCall> ParseCompletionCall(Endpoint endpoint, std::string_view body);

// The model publisher's sampling defaults (generation_config.json) for the
// fields the request left unset, as vLLM applies them; OpenAI's defaults
// (temperature 1, no top-p/top-k) remain where the model has none.
void ApplyGenerationDefaults(std::optional<double> temperature, std::optional<double> top_p,
                             std::optional<int64_t> top_k, CompletionCall& call);

// POST /tokenize (vLLM's shape): a `prompt`, or chat `messages` rendered
// through the template.
struct TokenizeCall {
  std::string model;
  std::optional<v1::TokenizeRequest> prompt;  // with `prompt`
  std::vector<v1::ChatMessage> messages;      // with `messages`
  bool add_generation_prompt = true;
};
absl::StatusOr<TokenizeCall> ParseTokenizeCall(std::string_view body);

// POST /detokenize: {"model", "tokens": [ids]}.
absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeCall(std::string_view body);

// The request field an INVALID_ARGUMENT from these parsers is about
// ("messages[2].role"); empty when none.
std::string ErrorParam(const absl::Status& status);

}  // namespace kvfleet::router::openai
