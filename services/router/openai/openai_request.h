// The OpenAI-compatible HTTP API's request bodies, turned into the public
// API's own requests (proto/kvfleet/v1/inference.proto): /v1/chat/completions
// into a ChatRequest, /v1/completions into a GenerateTextRequest, vLLM's
// /tokenize and /detokenize into theirs. JSON in, protos out; no network.
//
// What is accepted is the table in docs/api.md ("OpenAI-compatible HTTP").
// Unknown fields are ignored, as other servers do (clients send `n: 1`,
// `tool_choice: null`, `metadata`); a known field this server does not
// implement is refused only when it asks for something (`n` > 1,
// `best_of`, `echo`, `suffix`, the deprecated `functions`), naming the
// field. Defaults are OpenAI's (temperature 1), not the gRPC API's (greedy).
//
// Errors are INVALID_ARGUMENT with a message for the client and the
// offending field as the status's `param` payload (ErrorParam), which the
// error body carries as OpenAI's `param`.
//
//   ASSIGN_OR_RETURN(CompletionCall call, ParseCompletionCall(Endpoint::kChat, body));
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"

namespace kvfleet::router::openai {

enum class Endpoint { kChat, kCompletion };

// The conversation as the client sent it: what the chat template renders,
// so the prompt is the one Hugging Face's apply_chat_template makes of the
// same request. Every field and every key order is kept (templates write
// tools and calls with tojson, and some walk a tool's keys in order); only
// what the typed request also normalizes changes: the role "developer" is
// "system", text parts are joined into one string, and a call's
// `arguments` that are a JSON object's text become that object (templates
// index into them; vLLM does the same). The typed request (ChatRequest)
// says the same conversation and is what is validated.
struct SentConversation {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: none sent
};

struct CompletionCall {
  Endpoint endpoint = Endpoint::kChat;
  v1::ChatRequest chat;                // kChat
  SentConversation sent;               // kChat
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

// POST /tokenize (vLLM's shape): a `prompt`, or chat `messages` (with
// `tools`, `chat_template_kwargs` and `add_generation_prompt`, as a chat
// completion takes them) rendered through the template, so its count is
// that chat request's prompt_tokens.
struct TokenizeCall {
  std::string model;
  std::optional<v1::TokenizeRequest> prompt;  // with `prompt`
  std::optional<v1::ChatRequest> chat;        // with `messages`
  SentConversation sent;                      // with `messages`
};
absl::StatusOr<TokenizeCall> ParseTokenizeCall(std::string_view body);

// POST /detokenize: {"model", "tokens": [ids]}.
absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeCall(std::string_view body);

// The request field an INVALID_ARGUMENT from these parsers is about
// ("messages[2].role"); empty when none.
std::string ErrorParam(const absl::Status& status);

}  // namespace kvfleet::router::openai
