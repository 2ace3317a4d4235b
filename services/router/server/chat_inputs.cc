#include "services/router/server/chat_inputs.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::router {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(std::string what) { return absl::InvalidArgumentError(std::move(what)); }

bool IsKnownRole(const std::string& role) {
  return role == "system" || role == "developer" || role == "user" || role == "assistant" || role == "tool";
}

// OpenAI's rule for function names.
bool IsValidFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Json ParseOrNull(const std::string& text) { return Json::parse(text, nullptr, /*allow_exceptions=*/false); }

absl::StatusOr<Json> MessageJson(const v1::ChatMessage& m, int i) {
  const std::string at = absl::StrCat("messages[", i, "]");
  if (!IsKnownRole(m.role())) {
    return Bad(absl::StrCat(at, ".role is '", m.role(), "'; roles are system, developer, user, assistant and tool"));
  }
  Json j = Json::object();
  j["role"] = m.role();
  // An assistant turn that only calls tools has no content (null), as in OpenAI's API.
  if (m.role() == "assistant" && m.tool_calls_size() > 0 && m.content().empty()) {
    j["content"] = nullptr;
  } else {
    j["content"] = m.content();
  }
  if (!m.reasoning_content().empty()) j["reasoning_content"] = m.reasoning_content();
  if (m.tool_calls_size() > 0) {
    if (m.role() != "assistant") return Bad(absl::StrCat(at, ".tool_calls: only an assistant message makes calls"));
    Json calls = Json::array();
    for (int k = 0; k < m.tool_calls_size(); ++k) {
      const v1::ToolCall& c = m.tool_calls(k);
      if (c.name().empty()) return Bad(absl::StrCat(at, ".tool_calls[", k, "].function.name is missing"));
      // Templates index into the arguments (Hugging Face passes a dict), so a
      // JSON object arrives as one, as vLLM does; anything else stays text.
      Json args = ParseOrNull(c.arguments_json());
      Json call = {{"id", c.id()}, {"type", "function"},
                   {"function", {{"name", c.name()}, {"arguments", args.is_object() ? args : Json(c.arguments_json())}}}};
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  if (m.role() == "tool") {
    if (m.tool_call_id().empty()) {
      return Bad(absl::StrCat(at, ".tool_call_id is missing: a tool message answers a call; give that call's id"));
    }
    j["tool_call_id"] = m.tool_call_id();
  }
  if (!m.name().empty()) j["name"] = m.name();
  return j;
}

}  // namespace

absl::StatusOr<ChatPromptInputs> ChatInputsFromRequest(const v1::ChatRequest& request,
                                                       const openai::SentConversation* sent) {
  ChatPromptInputs out;
  model::ChatInputs& in = out.template_inputs;
  for (int i = 0; i < request.messages_size(); ++i) {
    ASSIGN_OR_RETURN(Json m, MessageJson(request.messages(i), i));
    in.messages.push_back(std::move(m));
  }
  in.add_generation_prompt = !request.has_add_generation_prompt() || request.add_generation_prompt();

  absl::flat_hash_set<std::string> names;
  if (request.tools_size() > 0) {
    in.tools = Json::array();
    for (int i = 0; i < request.tools_size(); ++i) {
      const v1::Tool& t = request.tools(i);
      const std::string at = absl::StrCat("tools[", i, "].function");
      if (!IsValidFunctionName(t.name())) {
        return Bad(absl::StrCat(at, ".name '", t.name(), "' must be 1 to 64 letters, digits, '_', '-' or '.'"));
      }
      if (!names.insert(t.name()).second) return Bad(absl::StrCat(at, ".name '", t.name(), "' is given twice"));
      Json parameters = t.parameters_json().empty() ? Json{{"type", "object"}, {"properties", Json::object()}}
                                                    : ParseOrNull(t.parameters_json());
      if (!parameters.is_object()) {
        return Bad(absl::StrCat(at, ".parameters must be a JSON Schema object; got ", t.parameters_json()));
      }
      Json function = {{"name", t.name()}};
      if (!t.description().empty()) function["description"] = t.description();
      function["parameters"] = std::move(parameters);
      if (t.strict()) function["strict"] = true;
      in.tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
  }
  const v1::ToolChoice& choice = request.tool_choice();
  if ((choice.mode() == v1::ToolChoice::REQUIRED || choice.mode() == v1::ToolChoice::FUNCTION) && names.empty()) {
    return Bad("tool_choice asks for a tool call, but the request offers no tools");
  }
  if (choice.mode() == v1::ToolChoice::FUNCTION && !names.contains(choice.function_name())) {
    return Bad(absl::StrCat("tool_choice names function '", choice.function_name(), "', which is not among tools"));
  }
  out.output.parse_tools = !names.empty() && choice.mode() != v1::ToolChoice::NONE;
  out.output.tool_names = choice.mode() == v1::ToolChoice::FUNCTION
                              ? absl::flat_hash_set<std::string>{choice.function_name()}
                              : std::move(names);

  if (!request.chat_template_kwargs_json().empty()) {
    Json kwargs = ParseOrNull(request.chat_template_kwargs_json());
    if (!kwargs.is_object()) return Bad("chat_template_kwargs must be a JSON object");
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
      if (kwargs.contains(reserved)) {
        return Bad(absl::StrCat("chat_template_kwargs sets '", reserved, "', which the request itself gives"));
      }
    }
    in.kwargs = std::move(kwargs);
  }
  // Checked above in its typed form: render it as sent.
  if (sent != nullptr) {
    in.messages = sent->messages;
    in.tools = sent->tools;
  }
  return out;
}

}  // namespace kvfleet::router
