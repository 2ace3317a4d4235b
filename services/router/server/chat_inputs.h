// A ChatRequest turned into what the chat template renders (ChatInputs:
// OpenAI-shaped messages and tools as JSON, template kwargs) and into the
// parsing its output needs (tool names, whether calls are parsed). Checks
// what a template cannot: roles, tool messages without the id of the call
// they answer, tools
// without a name or with parameters that are not a JSON object, a
// tool_choice naming an absent function, kwargs that are not an object or
// that would replace the conversation. Each error names the field.
//
// The template renders the conversation as the client sent it when the
// front end has it (the OpenAI-compatible API: `sent`, every key in its
// order and every field kept, so the prompt is Hugging Face's); otherwise
// (the gRPC API) as JSON built from the typed request, fields in OpenAI's
// order.
//
//   ASSIGN_OR_RETURN(ChatPromptInputs in, ChatInputsFromRequest(request, &call.sent));
#pragma once

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"
#include "model/tokenizer/chat_template.h"
#include "services/router/chat/chat_output_parser.h"
#include "services/router/openai/openai_request.h"

namespace kvfleet::router {

struct ChatPromptInputs {
  model::ChatInputs template_inputs;
  chat::ChatOutputOptions output;  // reasoning_starts_inside is the caller's to set
};

// `sent`: the same conversation as the client sent it; null when the front
// end has only the typed request.
absl::StatusOr<ChatPromptInputs> ChatInputsFromRequest(const v1::ChatRequest& request,
                                                       const openai::SentConversation* sent = nullptr);

}  // namespace kvfleet::router
