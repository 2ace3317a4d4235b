// The OpenAI-compatible HTTP API's response bodies, built from the public
// API's messages: chat.completion / text_completion objects, their
// streamed chunks as server-sent events ending with `data: [DONE]`, the
// model list, and OpenAI's error shape with the HTTP status that matches a
// gRPC code. JSON out; no network.
//
// Streaming. Each runner message becomes one chunk (none for a message
// whose tokens complete no character yet); a chat stream opens with the
// assistant role; the finish reason rides the last content chunk's
// successor, as OpenAI sends it; with stream_options.include_usage a final
// chunk with no choices carries the usage. Reasoning streams as
// `reasoning_content` deltas (vLLM's name); a tool call as OpenAI streams
// one: a chunk with its index, id, type and name, then its arguments.
//
//   CompletionFormatter out(call, "chatcmpl-...", created, tokenizer);
//   responder.Write(out.StreamEvents(message));  ...  responder.Write(out.StreamEnd());
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "kvfleet/v1/inference.pb.h"
#include "model/tokenizer/tokenizer.h"
#include "services/router/openai/openai_request.h"

namespace kvfleet::router::openai {

class CompletionFormatter {
 public:
  // `model` is the name the response reports (the served name);
  // `tokenizer` spells the tokens of logprobs.
  CompletionFormatter(const CompletionCall& call, std::string id, int64_t created, std::string model,
                      const model::Tokenizer& tokenizer);

  // Streaming: the events for one runner message.
  std::string StreamEvents(const v1::GenerateTextResponse& message);
  // Streaming: the usage chunk (when asked for) and `data: [DONE]`.
  std::string StreamEnd() const;

  // Whole: accumulates a message; Body() is the response once the last came.
  void Add(const v1::GenerateTextResponse& message);
  std::string Body() const;

 private:
  // One streamed chunk around `choice`.
  std::string Event(nlohmann::json choice) const;
  // The message's logprobs in the endpoint's shape; null when not asked for.
  nlohmann::json Logprobs(const v1::GenerateTextResponse& message);
  nlohmann::json UsageJson() const;
  static std::string FinishReason(v1::FinishReason reason);

  const CompletionCall& call_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const model::Tokenizer& tokenizer_;
  bool role_sent_ = false;
  std::string text_;
  std::string reasoning_;
  nlohmann::json tool_calls_ = nlohmann::json::array();
  nlohmann::json logprobs_;  // accumulated for a whole response
  std::string finish_reason_;
  v1::Usage usage_;
  int64_t text_offset_ = 0;  // completions' logprobs.text_offset
};

// The HTTP status for a call's gRPC-style code (400, 401, 404, 429, 503, 504, ...).
int HttpStatusFor(absl::StatusCode code);

// {"error": {"message", "type", "param", "code"}}; `param` empty: null.
std::string ErrorBody(int http_status, std::string_view message, std::string_view param = "");
// The same as one server-sent event, for an error after a stream began.
std::string StreamErrorEvent(int http_status, std::string_view message);

// POST /tokenize: {"count", "max_model_len", "tokens"}; POST /detokenize: {"prompt"}.
std::string TokenizeBody(const std::vector<int32_t>& ids, int32_t max_model_len);
std::string DetokenizeBody(const std::string& text);
// GET /health: {"status", "live_workers"}.
std::string HealthBody(int live_workers);

// GET /v1/models and /v1/models/{id}.
std::string ModelListBody(const v1::ListModelsResponse& models, int64_t created);
// The answer to POST /v1/load_lora_adapter (loaded) or /v1/unload_lora_adapter.
std::string LoraAdapterChangeBody(const v1::LoraAdapterChange& change, bool loaded);
std::string ModelBody(const v1::ModelInfo& model, int64_t created);

}  // namespace kvfleet::router::openai
