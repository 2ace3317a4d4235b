// A ChatRequest turned into what the chat template renders (ChatInputs:
// OpenAI-shaped messages and tools as JSON, template kwargs) and into the
// parsing its output needs (tool names, whether calls are parsed). Checks
// what a template cannot: roles, tool messages that answer no call, tools
// without a name or with parameters that are not a JSON object, a
// tool_choice naming an absent function, kwargs that are not an object or
// that would replace the conversation. Each error names the field.
//
//   ASSIGN_OR_RETURN(ChatPromptInputs in, ChatInputsFromRequest(request));
#pragma once

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"
#include "model/tokenizer/chat_template.h"
#include "services/router/chat/chat_output_parser.h"

namespace kvfleet::router {

struct ChatPromptInputs {
  model::ChatInputs template_inputs;
  chat::ChatOutputOptions output;  // reasoning_starts_inside is the caller's to set
};

absl::StatusOr<ChatPromptInputs> ChatInputsFromRequest(const v1::ChatRequest& request);

}  // namespace kvfleet::router
