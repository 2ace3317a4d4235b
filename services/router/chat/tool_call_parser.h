// Finds the tool calls in a model's output, in the format its chat
// template taught it, and returns the rest as content:
//   - kHermes (Qwen2.5, Qwen3, Hermes):
//       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//     any number, anywhere in the output;
//   - kLlama3Json (Llama 3.1/3.2/3.3): the whole output is
//       {"name": "f", "parameters": {...}}   (several separated by ";")
//   - kMistral (Mistral v0.3): [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
// A call is a JSON object whose "name" is one of the request's tools (any
// name when none are listed) and whose "arguments" ("parameters") is an
// object or a string holding one. Anything else is content: text that is
// malformed as a call, names no tool, or merely mentions the format in
// prose goes back to the client as the model wrote it, never half-parsed.
//
// Streaming: text outside calls is returned as soon as it cannot be the
// start of a call; a call is returned once it is complete and valid, so
// nothing already sent is ever retracted. When the output's calls are
// enforced by a grammar (valid by construction: `stream_arguments`), a
// Hermes call instead streams: its first piece names it once the name is
// read, and later pieces carry its arguments as the model writes them.
//
// Thread-safety: one per stream.
//
//   ToolCallParser p(ToolCallFormat::kHermes, {"get_weather"});
//   ToolParseOutput o = p.Push(delta);  // o.content, o.calls
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace kvfleet::router::chat {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kMistral };

// A call, or a piece of one: a piece with a name starts a call; a piece
// without one appends to the arguments of the call before it.
struct ParsedToolCall {
  std::string name;
  std::string arguments_json;  // whole: compact JSON object text; streamed: the model's text, in pieces
};

struct ToolParseOutput {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

class ToolCallParser {
 public:
  ToolCallParser(ToolCallFormat format, absl::flat_hash_set<std::string> tool_names, bool stream_arguments = false);

  ToolParseOutput Push(std::string_view text);
  ToolParseOutput Finish();
  // Whether any call has been returned.
  bool found_calls() const { return found_calls_; }

 private:
  enum class State { kDeciding, kText, kInCall, kWholeOutput };
  // A streamed Hermes call: reading its head up to the arguments, inside
  // the arguments object, or past it (up to the end tag).
  enum class Streamed { kNone, kHead, kArguments, kTail };

  void PushHermes(ToolParseOutput& out);
  // Streams what it can of the call at the front of pending_; false when
  // it must wait for more text.
  bool PushStreamedCall(ToolParseOutput& out);
  // A complete call's JSON text into `out`: a call when valid, else content.
  void EmitCall(std::string_view json_text, std::string_view raw, ToolParseOutput& out);
  void EmitContent(std::string_view text, ToolParseOutput& out);

  ToolCallFormat format_;
  absl::flat_hash_set<std::string> tool_names_;
  State state_;
  std::string pending_;
  bool found_calls_ = false;
  bool stream_arguments_;
  Streamed streamed_ = Streamed::kNone;
  int32_t depth_ = 0;  // of the streamed arguments' JSON nesting
  bool in_string_ = false;
  bool escaped_ = false;
};

// The call JSON text as a call: nullopt when it is not a valid call.
std::optional<ParsedToolCall> ReadToolCall(std::string_view json_text,
                                           const absl::flat_hash_set<std::string>& tool_names);

}  // namespace kvfleet::router::chat
