#include "services/router/chat/chat_output_parser.h"

namespace kvfleet::router::chat {

ChatOutputFormat DetectChatOutputFormat(std::string_view source, bool has_think_tokens) {
  ChatOutputFormat f;
  if (has_think_tokens) {
    f.think_start = "<think>";
    f.think_end = "</think>";
  }
  auto mentions = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (mentions("<tool_call>")) {
    f.tool_calls = ToolCallFormat::kHermes;
  } else if (mentions("[TOOL_CALLS]")) {
    f.tool_calls = ToolCallFormat::kMistral;
    f.marker_tokens.push_back("[TOOL_CALLS]");
  } else if (mentions("<|start_header_id|>") && (mentions("<|python_tag|>") || mentions("ipython"))) {
    f.tool_calls = ToolCallFormat::kLlama3Json;
  }
  return f;
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ChatOutputParser::ChatOutputParser(const ChatOutputFormat& format, ChatOutputOptions options)
    : reasoning_enabled_(!format.think_start.empty()),
      reasoning_(format.think_start, format.think_end, options.reasoning_starts_inside),
      tools_(options.parse_tools ? format.tool_calls : ToolCallFormat::kNone, std::move(options.tool_names),
             options.stream_call_arguments) {}

void ChatOutputParser::Route(SplitText split, ChatOutputDelta& out) {
  out.reasoning += split.reasoning;
  ToolParseOutput t = tools_.Push(split.content);
  out.content += t.content;
  for (ParsedToolCall& c : t.calls) out.calls.push_back(std::move(c));
}

ChatOutputDelta ChatOutputParser::Push(std::string_view text) {
  ChatOutputDelta out;
  Route(reasoning_enabled_ ? reasoning_.Push(text) : SplitText{"", std::string(text)}, out);
  return out;
}

ChatOutputDelta ChatOutputParser::Finish() {
  ChatOutputDelta out;
  if (reasoning_enabled_) Route(reasoning_.Finish(), out);
  ToolParseOutput t = tools_.Finish();
  out.content += t.content;
  for (ParsedToolCall& c : t.calls) out.calls.push_back(std::move(c));
  return out;
}

}  // namespace kvfleet::router::chat
