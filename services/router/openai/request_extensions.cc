// The chat extensions of the OpenAI request: tools, tool calls, tool_choice,
// chat_template_kwargs, structured outputs and logit_bias.
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/router/openai/request_fields.h"

namespace kvfleet::router::openai {

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
absl::Status ReadToolCalls(const Json& calls, const std::string& at, v1::ChatMessage& message) {
  if (!calls.is_array()) return WrongType(at, "a list of tool calls", calls);
  for (size_t k = 0; k < calls.size(); ++k) {
    const Json& c = calls[k];
    const std::string where = absl::StrCat(at, "[", k, "]");
    if (!c.is_object()) return WrongType(where, "an object", c);
    const Json* function = Field(c, "function");
    if (function == nullptr || !function->is_object()) return Bad(where + ".function", absl::StrCat("`", where, ".function` must be an object with a name and arguments"));
    ASSIGN_OR_RETURN(std::optional<std::string> name, String(*function, "name"));
    if (!name.has_value() || name->empty()) return Bad(where + ".function.name", absl::StrCat("`", where, ".function.name` is missing"));
    v1::ToolCall& call = *message.add_tool_calls();
    ASSIGN_OR_RETURN(std::optional<std::string> id, String(c, "id"));
    call.set_id(id.value_or(""));
    call.set_name(*name);
    const Json* arguments = Field(*function, "arguments");
    // OpenAI sends the arguments as a JSON string; an object is accepted too.
    if (arguments == nullptr || arguments->is_null()) {
      call.set_arguments_json("{}");
    } else if (arguments->is_string()) {
      call.set_arguments_json(arguments->get<std::string>());
    } else if (arguments->is_object()) {
      call.set_arguments_json(arguments->dump());
    } else {
      return WrongType(where + ".function.arguments", "a JSON string", *arguments);
    }
  }
  return absl::OkStatus();
}

// tools: [{type: "function", function: {name, description, parameters, strict}}].
absl::Status ReadTools(const Json& body, v1::ChatRequest& chat) {
  const Json* tools = Field(body, "tools");
  if (tools == nullptr || tools->is_null()) return absl::OkStatus();
  if (!tools->is_array()) return WrongType("tools", "a list of tools", *tools);
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string at = absl::StrCat("tools[", i, "]");
    if (!t.is_object()) return WrongType(at, "an object", t);
    ASSIGN_OR_RETURN(std::optional<std::string> type, String(t, "type"));
    if (type.value_or("function") != "function") {
      return Bad(at + ".type", absl::StrCat("`", at, ".type` is '", *type, "'; only function tools are supported"));
    }
    const Json* function = Field(t, "function");
    if (function == nullptr || !function->is_object()) return Bad(at + ".function", absl::StrCat("`", at, ".function` must be an object"));
    v1::Tool& tool = *chat.add_tools();
    ASSIGN_OR_RETURN(std::optional<std::string> name, String(*function, "name"));
    if (!name.has_value() || name->empty()) return Bad(at + ".function.name", absl::StrCat("`", at, ".function.name` is missing"));
    tool.set_name(*name);
    ASSIGN_OR_RETURN(std::optional<std::string> description, String(*function, "description"));
    tool.set_description(description.value_or(""));
    if (const Json* parameters = Field(*function, "parameters"); parameters != nullptr && !parameters->is_null()) {
      if (!parameters->is_object()) {
        return Bad(at + ".function.parameters", absl::StrCat("`", at, ".function.parameters` must be a JSON Schema object, not ", parameters->type_name()));
      }
      tool.set_parameters_json(parameters->dump());
    }
    ASSIGN_OR_RETURN(std::optional<bool> strict, Bool(*function, "strict"));
    tool.set_strict(strict.value_or(false));
  }
  return absl::OkStatus();
}

// tool_choice: "none" | "auto" | "required" | {type: "function", function: {name}}.
absl::Status ReadToolChoice(const Json& body, v1::ChatRequest& chat) {
  const Json* choice = Field(body, "tool_choice");
  if (choice == nullptr || choice->is_null()) return absl::OkStatus();
  v1::ToolChoice& out = *chat.mutable_tool_choice();
  if (choice->is_string()) {
    const std::string& mode = choice->get_ref<const std::string&>();
    if (mode == "auto") {
      out.set_mode(v1::ToolChoice::AUTO);
    } else if (mode == "none") {
      out.set_mode(v1::ToolChoice::NONE);
    } else if (mode == "required") {
      out.set_mode(v1::ToolChoice::REQUIRED);
    } else {
      return Bad("tool_choice", absl::StrCat("`tool_choice` is '", mode, "'; it must be none, auto, required or "
                                             "{\"type\": \"function\", \"function\": {\"name\": ...}}"));
    }
  } else {
    const Json* function = choice->is_object() ? Field(*choice, "function") : nullptr;
    const Json* name = function != nullptr && function->is_object() ? Field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return Bad("tool_choice", "`tool_choice` must be none, auto, required or {\"type\": \"function\", "
                                "\"function\": {\"name\": ...}}");
    }
    out.set_mode(v1::ToolChoice::FUNCTION);
    out.set_function_name(name->get<std::string>());
  }
  if (out.mode() == v1::ToolChoice::REQUIRED || out.mode() == v1::ToolChoice::FUNCTION) {
    if (chat.tools_size() == 0) return Bad("tool_choice", "`tool_choice` asks for a tool call, but `tools` is empty");
  }
  if (out.mode() == v1::ToolChoice::FUNCTION) {
    bool found = false;
    for (const v1::Tool& t : chat.tools()) found |= t.name() == out.function_name();
    if (!found) {
      return Bad("tool_choice", absl::StrCat("`tool_choice` names function '", out.function_name(),
                                             "', which is not among `tools`"));
    }
  }
  ASSIGN_OR_RETURN(std::optional<bool> parallel, Bool(body, "parallel_tool_calls"));
  if (parallel.has_value()) chat.set_parallel_tool_calls(*parallel);
  return absl::OkStatus();
}

// chat_template_kwargs (vLLM's): extra variables for the template.
absl::Status ReadTemplateKwargs(const Json& body, v1::ChatRequest& chat) {
  const Json* kwargs = Field(body, "chat_template_kwargs");
  if (kwargs == nullptr || kwargs->is_null()) return absl::OkStatus();
  if (!kwargs->is_object()) return WrongType("chat_template_kwargs", "an object", *kwargs);
  chat.set_chat_template_kwargs_json(kwargs->dump());
  return absl::OkStatus();
}

// Structured output: OpenAI's response_format, and vLLM's structured_outputs
// ({"json" | "regex" | "choice" | "grammar"}) with its older guided_* names.
absl::Status ReadConstraint(const Json& body, v1::GenerationOptions& options) {
  std::vector<std::string> given;
  v1::OutputConstraint c;
  if (const Json* rf = Field(body, "response_format"); rf != nullptr && !rf->is_null()) {
    if (!rf->is_object()) return WrongType("response_format", "an object", *rf);
    ASSIGN_OR_RETURN(std::optional<std::string> type, String(*rf, "type"));
    if (type == "json_object") {
      c.set_json_object(true);
      given.push_back("response_format");
    } else if (type == "json_schema") {
      const Json* js = Field(*rf, "json_schema");
      const Json* schema = js != nullptr && js->is_object() ? Field(*js, "schema") : nullptr;
      if (schema == nullptr || !(schema->is_object() || schema->is_boolean())) {
        return Bad("response_format.json_schema.schema",
                   "`response_format.json_schema.schema` must be a JSON Schema object");
      }
      c.set_json_schema(schema->dump());
      given.push_back("response_format");
    } else if (type.value_or("text") != "text") {
      return Bad("response_format.type", absl::StrCat("`response_format.type` is '", *type,
                                                      "'; it must be text, json_object or json_schema"));
    }
  }
  const Json* so = Field(body, "structured_outputs");
  if (so != nullptr && !so->is_null() && !so->is_object()) return WrongType("structured_outputs", "an object", *so);
  auto option = [&](const char* key, const char* legacy) -> std::pair<const Json*, std::string> {
    if (so != nullptr && so->is_object()) {
      if (const Json* v = Field(*so, key); v != nullptr && !v->is_null()) return {v, absl::StrCat("structured_outputs.", key)};
    }
    if (const Json* v = Field(body, legacy); v != nullptr && !v->is_null()) return {v, legacy};
    return {nullptr, ""};
  };
  if (auto [v, name] = option("json", "guided_json"); v != nullptr) {
    if (v->is_string()) {
      c.set_json_schema(v->get<std::string>());
    } else if (v->is_object()) {
      c.set_json_schema(v->dump());
    } else {
      return WrongType(name, "a JSON Schema", *v);
    }
    given.push_back(name);
  }
  if (auto [v, name] = option("regex", "guided_regex"); v != nullptr) {
    if (!v->is_string()) return WrongType(name, "a regular expression string", *v);
    c.set_regex(v->get<std::string>());
    given.push_back(name);
  }
  if (auto [v, name] = option("choice", "guided_choice"); v != nullptr) {
    if (!v->is_array() || v->empty()) return WrongType(name, "a non-empty list of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return WrongType(absl::StrCat(name, "[", i, "]"), "a string", (*v)[i]);
      c.mutable_choice()->add_choices((*v)[i].get<std::string>());
    }
    given.push_back(name);
  }
  if (auto [v, name] = option("grammar", "guided_grammar"); v != nullptr) {
    if (!v->is_string()) return WrongType(name, "an EBNF grammar string", *v);
    c.set_grammar(v->get<std::string>());
    given.push_back(name);
  }
  if (given.size() > 1) {
    return Bad(given[1], absl::StrCat("`", given[0], "` and `", given[1], "` both constrain the output: give one"));
  }
  if (!given.empty()) *options.mutable_constraint() = std::move(c);
  return absl::OkStatus();
}

SentConversation SentAsTemplateSees(const Json& body) {
  SentConversation sent;
  sent.messages = body.at("messages");
  for (Json& m : sent.messages) {
    if (m["role"] == "developer") m["role"] = "system";
    if (const Json* content = Field(m, "content"); content != nullptr && content->is_array()) {
      std::string text;
      for (size_t i = 0; i < content->size(); ++i) {
        if (i > 0) text += "\n";
        if (const Json* t = Field((*content)[i], "text"); t != nullptr) text += t->get<std::string>();
      }
      m["content"] = text;
    }
    if (const Json* calls = Field(m, "tool_calls"); calls != nullptr && calls->is_array()) {
      for (Json& call : m["tool_calls"]) {
        Json& function = call["function"];
        const Json* arguments = Field(function, "arguments");
        if (arguments == nullptr || !arguments->is_string()) continue;
        Json object = Json::parse(arguments->get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (object.is_object()) function["arguments"] = std::move(object);
      }
    }
  }
  if (const Json* tools = Field(body, "tools"); tools != nullptr && !tools->empty()) sent.tools = *tools;
  return sent;
}

// logit_bias: {"token id": bias in [-100, 100]}.
absl::Status ReadLogitBias(const Json& body, v1::SamplingParams& sampling) {
  const Json* bias = Field(body, "logit_bias");
  if (bias == nullptr || bias->is_null()) return absl::OkStatus();
  if (!bias->is_object()) return WrongType("logit_bias", "an object of token id to bias", *bias);
  for (const auto& [key, value] : bias->items()) {
    const std::string at = absl::StrCat("logit_bias.", key);
    int64_t id = -1;
    if (!absl::SimpleAtoi(key, &id) || id < 0 || id > INT32_MAX) {
      return Bad(at, absl::StrCat("`logit_bias` key '", key, "' is not a token id"));
    }
    if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100) {
      return Bad(at, absl::StrCat("`", at, "` must be a number in [-100, 100]"));
    }
    (*sampling.mutable_logit_bias())[static_cast<int32_t>(id)] = value.get<float>();
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::router::openai
