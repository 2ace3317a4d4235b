#include "services/router/chat/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "services/router/chat/reasoning_parser.h"

namespace kvfleet::router::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesStart = "<tool_call>";
constexpr std::string_view kHermesEnd = "</tool_call>";
constexpr std::string_view kMistralStart = "[TOOL_CALLS]";

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::optional<Json> ParseJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<ParsedToolCall> CallFromJson(const Json& j, const absl::flat_hash_set<std::string>& tool_names) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  if (!tool_names.empty() && !tool_names.contains(name->get<std::string>())) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  Json arguments = Json::object();
  if (args != j.end()) {
    if (args->is_string()) {  // some models write the object as a JSON string
      std::optional<Json> inner = ParseJson(args->get<std::string>());
      if (!inner.has_value() || !inner->is_object()) return std::nullopt;
      arguments = *std::move(inner);
    } else if (args->is_object()) {
      arguments = *args;
    } else {
      return std::nullopt;
    }
  }
  return ParsedToolCall{name->get<std::string>(), arguments.dump()};
}

// A streamed Hermes call's head, `{"name": "f", "arguments": `, read from
// the text after the start tag.
struct CallHead {
  enum { kIncomplete, kNotAHead, kComplete } result;
  size_t length = 0;  // up to the arguments' "{"
  std::string name;
};

CallHead ReadCallHead(std::string_view text) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) ++i;
  };
  // 1: `literal` is next; 0: the text ends inside it; -1: something else is next.
  auto literal = [&](std::string_view lit) {
    const std::string_view have = text.substr(i, lit.size());
    if (lit.substr(0, have.size()) != have) return -1;
    if (have.size() < lit.size()) return 0;
    i += lit.size();
    return 1;
  };
  CallHead head{CallHead::kIncomplete};
  for (std::string_view lit : {std::string_view("{"), std::string_view("\"name\""), std::string_view(":")}) {
    skip_space();
    const int r = literal(lit);
    if (r <= 0) return {r < 0 ? CallHead::kNotAHead : CallHead::kIncomplete};
  }
  skip_space();
  if (i == text.size()) return head;
  if (text[i] != '"') return {CallHead::kNotAHead};
  size_t end = i + 1;
  for (bool escaped = false; end < text.size(); ++end) {
    if (escaped) {
      escaped = false;
    } else if (text[end] == '\\') {
      escaped = true;
    } else if (text[end] == '"') {
      break;
    }
  }
  if (end == text.size()) return head;
  std::optional<Json> name = ParseJson(text.substr(i, end + 1 - i));
  if (!name.has_value() || !name->is_string()) return {CallHead::kNotAHead};
  head.name = name->get<std::string>();
  i = end + 1;
  skip_space();
  int r = literal(",");
  if (r <= 0) return {r < 0 ? CallHead::kNotAHead : CallHead::kIncomplete};
  skip_space();
  const size_t key = i;
  r = literal("\"arguments\"");
  if (r < 0) {
    i = key;
    r = literal("\"parameters\"");
  }
  if (r <= 0) return {r < 0 ? CallHead::kNotAHead : CallHead::kIncomplete};
  skip_space();
  r = literal(":");
  if (r <= 0) return {r < 0 ? CallHead::kNotAHead : CallHead::kIncomplete};
  skip_space();
  if (i == text.size()) return {CallHead::kIncomplete};
  if (text[i] != '{') return {CallHead::kNotAHead};
  head.result = CallHead::kComplete;
  head.length = i;
  return head;
}

}  // namespace

std::optional<ParsedToolCall> ReadToolCall(std::string_view json_text,
                                           const absl::flat_hash_set<std::string>& tool_names) {
  std::optional<Json> j = ParseJson(Trim(json_text));
  if (!j.has_value()) return std::nullopt;
  return CallFromJson(*j, tool_names);
}

ToolCallParser::ToolCallParser(ToolCallFormat format, absl::flat_hash_set<std::string> tool_names,
                               bool stream_arguments)
    : format_(format),
      tool_names_(std::move(tool_names)),
      state_(format == ToolCallFormat::kHermes || format == ToolCallFormat::kNone ? State::kText : State::kDeciding),
      stream_arguments_(stream_arguments) {}

void ToolCallParser::EmitContent(std::string_view text, ToolParseOutput& out) {
  // Between and after calls, the whitespace that separates them is not content.
  if (found_calls_ && Trim(text).empty()) return;
  out.content.append(text);
}

void ToolCallParser::EmitCall(std::string_view json_text, std::string_view raw, ToolParseOutput& out) {
  std::optional<ParsedToolCall> call = ReadToolCall(json_text, tool_names_);
  if (!call.has_value()) {
    out.content.append(raw);
    return;
  }
  found_calls_ = true;
  out.calls.push_back(*std::move(call));
}

void ToolCallParser::PushHermes(ToolParseOutput& out) {
  while (!pending_.empty()) {
    if (state_ == State::kText) {
      const size_t start = pending_.find(kHermesStart);
      if (start == std::string::npos) {
        const size_t hold = PartialTagSuffix(pending_, kHermesStart);
        EmitContent(std::string_view(pending_).substr(0, pending_.size() - hold), out);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      EmitContent(std::string_view(pending_).substr(0, start), out);
      pending_.erase(0, start);
      state_ = State::kInCall;
      streamed_ = stream_arguments_ ? Streamed::kHead : Streamed::kNone;
    }
    if (streamed_ != Streamed::kNone) {
      if (!PushStreamedCall(out)) return;
      continue;
    }
    const size_t end = pending_.find(kHermesEnd);
    if (end == std::string::npos) return;  // wait for the rest of the call
    const std::string_view raw = std::string_view(pending_).substr(0, end + kHermesEnd.size());
    EmitCall(raw.substr(kHermesStart.size(), end - kHermesStart.size()), raw, out);
    pending_.erase(0, raw.size());
    state_ = State::kText;
  }
}

bool ToolCallParser::PushStreamedCall(ToolParseOutput& out) {
  if (streamed_ == Streamed::kHead) {
    const CallHead head = ReadCallHead(std::string_view(pending_).substr(kHermesStart.size()));
    if (head.result == CallHead::kIncomplete) return false;
    if (head.result == CallHead::kNotAHead || (!tool_names_.empty() && !tool_names_.contains(head.name))) {
      streamed_ = Streamed::kNone;  // read whole, like an unenforced call
      return true;
    }
    found_calls_ = true;
    out.calls.push_back({head.name, ""});
    pending_.erase(0, kHermesStart.size() + head.length);
    streamed_ = Streamed::kArguments;
    depth_ = 0;
    in_string_ = escaped_ = false;
  }
  if (streamed_ == Streamed::kArguments) {
    size_t end = 0;
    bool closed = false;
    for (; end < pending_.size() && !closed; ++end) {
      const char c = pending_[end];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        closed = --depth_ == 0;
      }
    }
    if (end > 0) out.calls.push_back({"", pending_.substr(0, end)});
    pending_.erase(0, end);
    if (!closed) return false;
    streamed_ = Streamed::kTail;
  }
  // The call object's "}" and the end tag.
  const size_t end = pending_.find(kHermesEnd);
  if (end == std::string::npos) return false;
  pending_.erase(0, end + kHermesEnd.size());
  streamed_ = Streamed::kNone;
  state_ = State::kText;
  return true;
}

ToolParseOutput ToolCallParser::Push(std::string_view text) {
  ToolParseOutput out;
  if (format_ == ToolCallFormat::kNone) {
    out.content.assign(text);
    return out;
  }
  pending_.append(text);
  if (format_ == ToolCallFormat::kHermes) {
    PushHermes(out);
    return out;
  }
  if (state_ == State::kDeciding) {
    // A Llama 3 call is the whole output, starting with "{"; a Mistral one
    // starts with [TOOL_CALLS]. Anything else is plain content from here on.
    std::string_view start = Trim(pending_);
    if (start.empty()) return out;
    const std::string_view opener = format_ == ToolCallFormat::kMistral ? kMistralStart : std::string_view("{");
    if (start.substr(0, opener.size()) == opener) {
      state_ = State::kWholeOutput;
    } else if (opener.substr(0, start.size()) == start) {
      return out;  // the opener in the making
    } else {
      state_ = State::kText;
    }
  }
  if (state_ == State::kText) {
    out.content += pending_;
    pending_.clear();
  }
  return out;  // kWholeOutput: parsed at Finish
}

ToolParseOutput ToolCallParser::Finish() {
  ToolParseOutput out;
  if (streamed_ == Streamed::kArguments || streamed_ == Streamed::kTail) {
    // The output ended inside a streamed call (max_tokens): what was sent
    // of it stands, as OpenAI's truncated calls do.
    pending_.clear();
    return out;
  }
  if (state_ == State::kInCall && format_ == ToolCallFormat::kHermes) {
    // The output ended inside a call (a model may stop before the closing
    // tag): a complete object is still a call.
    const std::string raw = std::move(pending_);
    pending_.clear();
    EmitCall(std::string_view(raw).substr(kHermesStart.size()), raw, out);
    return out;
  }
  if (state_ == State::kWholeOutput) {
    std::string_view body = Trim(pending_);
    std::vector<ParsedToolCall> calls;
    bool ok = true;
    if (format_ == ToolCallFormat::kMistral) {
      std::optional<Json> list = ParseJson(body.substr(kMistralStart.size()));
      ok = list.has_value() && list->is_array() && !list->empty();
      for (size_t i = 0; ok && i < list->size(); ++i) {
        std::optional<ParsedToolCall> call = CallFromJson((*list)[i], tool_names_);
        ok = call.has_value();
        if (ok) calls.push_back(*std::move(call));
      }
    } else {
      // One object, or several separated by ";".
      size_t from = 0;
      while (ok && from < body.size()) {
        size_t semicolon = body.find(';', from);
        std::string_view piece;
        std::optional<Json> j;
        // A ";" inside a string is not a separator: grow the piece until it parses.
        for (;;) {
          piece = body.substr(from, semicolon == std::string_view::npos ? std::string_view::npos : semicolon - from);
          j = ParseJson(Trim(piece));
          if (j.has_value() || semicolon == std::string_view::npos) break;
          semicolon = body.find(';', semicolon + 1);
        }
        std::optional<ParsedToolCall> call = j.has_value() ? CallFromJson(*j, tool_names_) : std::nullopt;
        ok = call.has_value();
        if (ok) calls.push_back(*std::move(call));
        from = semicolon == std::string_view::npos ? body.size() : semicolon + 1;
      }
    }
    if (ok && !calls.empty()) {
      found_calls_ = true;
      out.calls = std::move(calls);
    } else {
      out.content = std::move(pending_);
    }
    pending_.clear();
    return out;
  }
  out.content = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvfleet::router::chat
