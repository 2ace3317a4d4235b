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

}  // namespace

std::optional<ParsedToolCall> ReadToolCall(std::string_view json_text,
                                           const absl::flat_hash_set<std::string>& tool_names) {
  std::optional<Json> j = ParseJson(Trim(json_text));
  if (!j.has_value()) return std::nullopt;
  return CallFromJson(*j, tool_names);
}

ToolCallParser::ToolCallParser(ToolCallFormat format, absl::flat_hash_set<std::string> tool_names)
    : format_(format),
      tool_names_(std::move(tool_names)),
      state_(format == ToolCallFormat::kHermes || format == ToolCallFormat::kNone ? State::kText : State::kDeciding) {}

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
    }
    const size_t end = pending_.find(kHermesEnd);
    if (end == std::string::npos) return;  // wait for the rest of the call
    const std::string_view raw = std::string_view(pending_).substr(0, end + kHermesEnd.size());
    EmitCall(raw.substr(kHermesStart.size(), end - kHermesStart.size()), raw, out);
    pending_.erase(0, raw.size());
    state_ = State::kText;
  }
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

ToolParseOutput ParseToolCalls(ToolCallFormat format, const absl::flat_hash_set<std::string>& tool_names,
                               std::string_view output) {
  ToolCallParser p(format, tool_names);
  ToolParseOutput out = p.Push(output);
  ToolParseOutput rest = p.Finish();
  out.content += rest.content;
  for (ParsedToolCall& c : rest.calls) out.calls.push_back(std::move(c));
  return out;
}

}  // namespace kvfleet::router::chat
