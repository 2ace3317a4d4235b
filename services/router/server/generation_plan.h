// A public API call turned into what the router sends a worker: the prompt
// as token ids (raw text tokenized, chat messages rendered through the
// template), the worker's GenerateRequest, and the stop strings the router
// applies itself. Validation that needs the model (ids in the vocabulary,
// the prompt within the context, the model name) happens here, before any
// worker is asked; the rest the worker checks and names.
//
// A sampled request without a seed gets one here, so that a stream resumed
// on another worker continues with the same draws (docs/design.md, Failover).
//
//   ASSIGN_OR_RETURN(GenerationPlan plan, PlanGenerate(model, request, /*fresh_seed=*/rng()));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"
#include "kvfleet/v1/worker.pb.h"
#include "services/limits/request_limits.h"
#include "services/router/chat/chat_output_parser.h"
#include "services/router/frontend/router_model.h"
#include "services/router/openai/openai_request.h"

namespace kvfleet::router {

struct GenerationPlan {
  ServedModel model;  // what the prompt was tokenized for, and where it goes
  std::vector<int32_t> prompt;
  // Everything but resumed_output_token_ids, which each attempt sets.
  v1::GenerateRequest worker_request;
  std::vector<std::string> stop_strings;
  std::string session_id;  // placement only: the worker never sees it
  // Chat only: how the output is split into reasoning, tool calls and content.
  bool is_chat = false;
  chat::ChatOutputOptions chat_output;
};

// For `model`, the one the request named (the caller resolved it:
// ModelCatalog::Resolve). INVALID_ARGUMENT naming the limit for a request
// over one of `limits`.
absl::StatusOr<GenerationPlan> PlanGenerate(const ServedModel& model, const v1::GenerateTextRequest& request,
                                            uint64_t fresh_seed, const limits::RequestLimits& limits = {});
// `sent`: the conversation as the client sent it (ChatInputsFromRequest).
absl::StatusOr<GenerationPlan> PlanChat(const ServedModel& model, const v1::ChatRequest& request, uint64_t fresh_seed,
                                        const limits::RequestLimits& limits = {},
                                        const openai::SentConversation* sent = nullptr);

// A chat request's prompt: the messages' limits checked, the template
// rendered (with the tools and kwargs) and tokenized. What PlanChat sends a
// worker, and what /tokenize answers for the same messages.
struct ChatPrompt {
  std::vector<int32_t> ids;
  chat::ChatOutputOptions output;  // reasoning_starts_inside set
};
absl::StatusOr<ChatPrompt> EncodeChatRequest(const RouterModel& model, const v1::ChatRequest& request,
                                             const limits::RequestLimits& limits,
                                             const openai::SentConversation* sent = nullptr);

}  // namespace kvfleet::router
