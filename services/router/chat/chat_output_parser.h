// A chat completion's output as the client receives it: reasoning
// (reasoning_parser.h), then tool calls (tool_call_parser.h), then the
// content that is left. Which of them a model has is read from its chat
// template and vocabulary once (DetectChatOutputFormat); which a request
// uses depends on it (tools offered and tool_choice not "none").
//
// Thread-safety: one parser per stream; the format is a value.
//
//   ChatOutputParser p(model_format, {.parse_tools = true, .tool_names = {"f"}});
//   ChatOutputDelta d = p.Push(text_delta);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "services/router/chat/reasoning_parser.h"
#include "services/router/chat/tool_call_parser.h"

namespace kvfleet::router::chat {

struct ChatOutputFormat {
  // Empty: the model does not reason between tags.
  std::string think_start;
  std::string think_end;
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  // Control tokens the parsers must see although detokenization drops
  // control tokens (Mistral's [TOOL_CALLS]).
  std::vector<std::string> marker_tokens;
};

// `has_think_tokens`: the vocabulary has "<think>" and "</think>".
ChatOutputFormat DetectChatOutputFormat(std::string_view template_source, bool has_think_tokens);
std::string_view ToolCallFormatName(ToolCallFormat format);

struct ChatOutputOptions {
  // The prompt ends inside an open reasoning block (DeepSeek-R1's "<think>\n").
  bool reasoning_starts_inside = false;
  bool parse_tools = false;
  absl::flat_hash_set<std::string> tool_names;
  // The worker enforces the calls' shape with a grammar, so they stream in
  // pieces (ToolCallParser's stream_arguments).
  bool stream_call_arguments = false;
};

struct ChatOutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
};

class ChatOutputParser {
 public:
  ChatOutputParser(const ChatOutputFormat& format, ChatOutputOptions options);

  ChatOutputDelta Push(std::string_view text);
  ChatOutputDelta Finish();
  bool found_calls() const { return tools_.found_calls(); }

 private:
  void Route(SplitText split, ChatOutputDelta& out);

  bool reasoning_enabled_;
  ReasoningParser reasoning_;
  ToolCallParser tools_;
};

}  // namespace kvfleet::router::chat
