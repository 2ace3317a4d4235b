#include "services/router/openai/openai_request.h"

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "services/router/openai/request_fields.h"

namespace kvfleet::router::openai {
namespace {

absl::StatusOr<Json> ParseObject(std::string_view body) {
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& e) {
    return Bad("", absl::StrCat("the request body is not valid JSON (at byte ", e.byte, "); send a JSON object"));
  } catch (const Json::exception& e) {
    // A number no double holds (1e400) is out_of_range, not a parse error.
    return Bad("", absl::StrCat("the request body is not JSON this server can read: ", e.what()));
  }
  if (!j.is_object()) return Bad("", absl::StrCat("the request body must be a JSON object, not ", j.type_name()));
  return j;
}

// Known features this server does not implement: refused when they ask
// for something, so a client never silently gets less than it asked for.
absl::Status RefuseUnsupported(const Json& body, Endpoint endpoint) {
  ASSIGN_OR_RETURN(std::optional<int64_t> n, Integer(body, "n"));
  if (n.has_value() && *n != 1) {
    return Bad("n", absl::StrCat("`n` is ", *n, "; this server returns one choice per request: send n = 1 (or "
                                 "omit it) and make separate requests"));
  }
  if (const Json* v = Field(body, "functions"); v != nullptr && !(v->is_array() && v->empty())) {
    return Bad("functions", "`functions` is OpenAI's deprecated form: give them as `tools` of type function");
  }
  if (const Json* v = Field(body, "function_call"); v != nullptr && !v->is_null()) {
    return Bad("function_call", "`function_call` is OpenAI's deprecated form: use `tool_choice`");
  }
  if (endpoint == Endpoint::kCompletion) {
    for (const char* name : {"tools", "tool_choice"}) {
      if (const Json* v = Field(body, name); v != nullptr && !v->is_null() && !(v->is_array() && v->empty())) {
        return Bad(name, absl::StrCat("`", name, "` belongs to /v1/chat/completions"));
      }
    }
  }

  if (endpoint == Endpoint::kCompletion) {
    ASSIGN_OR_RETURN(std::optional<bool> echo, Bool(body, "echo"));
    if (echo.value_or(false)) return Bad("echo", "`echo` is not supported: the response holds the completion only");
    ASSIGN_OR_RETURN(std::optional<int64_t> best_of, Integer(body, "best_of"));
    if (best_of.has_value() && *best_of != 1) return Bad("best_of", "`best_of` other than 1 is not supported");
    ASSIGN_OR_RETURN(std::optional<std::string> suffix, String(body, "suffix"));
    if (suffix.has_value() && !suffix->empty()) return Bad("suffix", "`suffix` is not supported");
  }
  return absl::OkStatus();
}

absl::Status ReadStop(const Json& body, v1::GenerationOptions& options) {
  const Json* stop = Field(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    options.add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or a list of strings", *stop);
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string()) return WrongType(absl::StrCat("stop[", i, "]"), "a string", (*stop)[i]);
    options.add_stop((*stop)[i].get<std::string>());
  }
  return absl::OkStatus();
}

// Sampling, stopping and the extension fields both endpoints share.
absl::Status ReadOptions(const Json& body, CompletionCall& call, v1::GenerationOptions& options) {
  ASSIGN_OR_RETURN(std::optional<std::string> model, String(body, "model"));
  call.model = model.value_or("");
  options.set_model(call.model);
  ASSIGN_OR_RETURN(std::optional<bool> stream, Bool(body, "stream"));
  call.stream = stream.value_or(false);
  if (const Json* so = Field(body, "stream_options"); so != nullptr) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    ASSIGN_OR_RETURN(std::optional<bool> usage, Bool(*so, "include_usage"));
    call.include_usage = usage.value_or(false);
  }

  RETURN_IF_ERROR(ReadConstraint(body, options));
  v1::SamplingParams& s = *options.mutable_sampling();
  RETURN_IF_ERROR(ReadLogitBias(body, s));
  ASSIGN_OR_RETURN(std::optional<double> temperature, Number(body, "temperature"));
  call.temperature_set = temperature.has_value();
  s.set_temperature(static_cast<float>(temperature.value_or(1.0)));  // OpenAI's default
  ASSIGN_OR_RETURN(std::optional<double> top_p, Number(body, "top_p"));
  call.top_p_set = top_p.has_value();
  if (top_p.has_value()) s.set_top_p(static_cast<float>(*top_p));
  ASSIGN_OR_RETURN(std::optional<int64_t> top_k, Integer(body, "top_k"));
  call.top_k_set = top_k.has_value();
  if (top_k.has_value() && *top_k > 0) {
    s.set_top_k(static_cast<int32_t>(std::min<int64_t>(*top_k, INT32_MAX)));
  } else if (top_k.has_value() && *top_k < -1) {
    return Bad("top_k", absl::StrCat("`top_k` is ", *top_k, "; give a count, or 0 or -1 for no limit"));
  }
  ASSIGN_OR_RETURN(std::optional<double> min_p, Number(body, "min_p"));
  if (min_p.has_value()) s.set_min_p(static_cast<float>(*min_p));
  ASSIGN_OR_RETURN(std::optional<int64_t> seed, Integer(body, "seed"));
  if (seed.has_value()) {
    if (*seed < 0) return Bad("seed", absl::StrCat("`seed` is ", *seed, "; give a non-negative integer"));
    s.set_seed(static_cast<uint64_t>(*seed));
  }
  ASSIGN_OR_RETURN(std::optional<double> presence, Number(body, "presence_penalty"));
  if (presence.has_value()) s.set_presence_penalty(static_cast<float>(*presence));
  ASSIGN_OR_RETURN(std::optional<double> frequency, Number(body, "frequency_penalty"));
  if (frequency.has_value()) s.set_frequency_penalty(static_cast<float>(*frequency));
  ASSIGN_OR_RETURN(std::optional<double> repetition, Number(body, "repetition_penalty"));
  if (repetition.has_value()) s.set_repetition_penalty(static_cast<float>(*repetition));

  v1::StoppingParams& stopping = *options.mutable_stopping();
  ASSIGN_OR_RETURN(std::optional<int32_t> max_tokens, Bounded(body, "max_tokens", 1, INT32_MAX));
  ASSIGN_OR_RETURN(std::optional<int32_t> max_completion, Bounded(body, "max_completion_tokens", 1, INT32_MAX));
  // The newer name wins when both are sent; neither: up to the context.
  if (max_completion.has_value()) {
    stopping.set_max_tokens(*max_completion);
  } else if (max_tokens.has_value()) {
    stopping.set_max_tokens(*max_tokens);
  }
  ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, Bool(body, "ignore_eos"));
  stopping.set_ignore_eos(ignore_eos.value_or(false));
  if (const Json* ids = Field(body, "stop_token_ids"); ids != nullptr) {
    if (!ids->is_array()) return WrongType("stop_token_ids", "a list of token ids", *ids);
    for (size_t i = 0; i < ids->size(); ++i) {
      ASSIGN_OR_RETURN(int32_t id, TokenId((*ids)[i], absl::StrCat("stop_token_ids[", i, "]")));
      stopping.add_stop_token_ids(id);
    }
  }
  RETURN_IF_ERROR(ReadStop(body, options));

  if (call.endpoint == Endpoint::kChat) {
    ASSIGN_OR_RETURN(std::optional<bool> logprobs, Bool(body, "logprobs"));
    ASSIGN_OR_RETURN(std::optional<int32_t> top, Bounded(body, "top_logprobs", 0, 20));
    call.logprobs = logprobs.value_or(false);
    call.top_logprobs = top.value_or(0);
    if (call.top_logprobs > 0 && !call.logprobs) {
      return Bad("top_logprobs", "`top_logprobs` needs `logprobs`: true");
    }
  } else {
    ASSIGN_OR_RETURN(std::optional<int32_t> count, Bounded(body, "logprobs", 0, 20));
    call.logprobs = count.has_value();
    call.top_logprobs = count.value_or(0);
  }
  options.set_logprobs(call.logprobs);
  options.set_top_logprobs(call.top_logprobs);

  ASSIGN_OR_RETURN(std::optional<std::string> salt, String(body, "cache_salt"));
  options.set_cache_salt(salt.value_or(""));
  ASSIGN_OR_RETURN(std::optional<std::string> user, String(body, "user"));
  call.user = user.value_or("");
  ASSIGN_OR_RETURN(std::optional<int64_t> priority, Integer(body, "priority"));
  if (priority.has_value()) {
    options.set_priority(static_cast<int32_t>(std::clamp<int64_t>(*priority, INT32_MIN, INT32_MAX)));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> session, String(body, "session_id"));
  options.set_session_id(session.value_or(""));
  return absl::OkStatus();
}

// A message's content: a string, or text parts joined by newlines.
absl::StatusOr<std::string> ReadContent(const Json& message, const std::string& at, bool may_be_empty) {
  const Json* content = Field(message, "content");
  if (content == nullptr || content->is_null()) {
    if (may_be_empty) return std::string();
    return Bad(at + ".content", absl::StrCat("`", at, ".content` is missing"));
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) return WrongType(at + ".content", "a string or a list of content parts", *content);
  std::vector<std::string> texts;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string where = absl::StrCat(at, ".content[", i, "]");
    if (!part.is_object()) return WrongType(where, "an object", part);
    const Json* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) return Bad(where + ".type", absl::StrCat("`", where, ".type` is missing"));
    if (*type != "text") {
      return Bad(where + ".type", absl::StrCat("content parts of type '", type->get<std::string>(),
                                               "' are not supported: this model takes text parts only"));
    }
    ASSIGN_OR_RETURN(std::optional<std::string> text, String(part, "text"));
    texts.push_back(text.value_or(""));
  }
  return absl::StrJoin(texts, "\n");
}

absl::StatusOr<std::vector<v1::ChatMessage>> ReadMessages(const Json& body) {
  const Json* messages = Field(body, "messages");
  if (messages == nullptr) return Bad("messages", "`messages` is missing: give the conversation as a list");
  if (!messages->is_array()) return WrongType("messages", "a list of messages", *messages);
  if (messages->empty()) return Bad("messages", "`messages` is empty: give at least one message");
  std::vector<v1::ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(at, "an object", m);
    const Json* role_json = Field(m, "role");
    if (role_json == nullptr || !role_json->is_string()) {
      return Bad(at + ".role", absl::StrCat("`", at, ".role` must be system, developer, user, assistant or tool"));
    }
    std::string role = role_json->get<std::string>();
    if (role == "function") {
      return Bad(at + ".role", absl::StrCat("`", at, ".role` 'function' is OpenAI's deprecated form: send the result "
                                            "as a 'tool' message with the call's tool_call_id"));
    }
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      return Bad(at + ".role", absl::StrCat("`", at, ".role` is '", role,
                                            "'; it must be system, developer, user, assistant or tool"));
    }
    // Templates know "system"; "developer" is OpenAI's newer name for it.
    if (role == "developer") role = "system";
    v1::ChatMessage& message = out.emplace_back();
    message.set_role(role);
    const Json* calls = Field(m, "tool_calls");
    const bool has_calls = calls != nullptr && !calls->is_null() && !(calls->is_array() && calls->empty());
    if (has_calls) {
      if (role != "assistant") return Bad(at + ".tool_calls", absl::StrCat("`", at, ".tool_calls`: only an assistant message makes calls"));
      RETURN_IF_ERROR(ReadToolCalls(*calls, at + ".tool_calls", message));
    }
    ASSIGN_OR_RETURN(*message.mutable_content(), ReadContent(m, at, /*may_be_empty=*/role == "assistant" || role == "tool"));
    if (role == "tool") {
      ASSIGN_OR_RETURN(std::optional<std::string> id, String(m, "tool_call_id"));
      if (!id.has_value() || id->empty()) {
        return Bad(at + ".tool_call_id", absl::StrCat("`", at, ".tool_call_id` is missing: a tool message answers a "
                                                      "call; give that call's id"));
      }
      message.set_tool_call_id(*id);
    }
    ASSIGN_OR_RETURN(std::optional<std::string> name, String(m, "name"));
    if (name.has_value()) message.set_name(*name);
    ASSIGN_OR_RETURN(std::optional<std::string> reasoning, String(m, "reasoning_content"));
    if (reasoning.has_value()) message.set_reasoning_content(*reasoning);
  }
  return out;
}

absl::Status ReadPrompt(const Json& body, v1::GenerateTextRequest& request) {
  const Json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return Bad("prompt", "`prompt` is missing: give a string or a list of token ids");
  if (prompt->is_string()) {
    if (prompt->get_ref<const std::string&>().empty()) return Bad("prompt", "`prompt` is empty");
    request.set_prompt(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array()) return WrongType("prompt", "a string or a list of token ids", *prompt);
  if (prompt->empty()) return Bad("prompt", "`prompt` is empty");
  if (!(*prompt)[0].is_number_integer()) {
    return Bad("prompt", "`prompt` holds several prompts; this server takes one per request: send a string or "
                         "one list of token ids, and make separate requests for the others");
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    ASSIGN_OR_RETURN(int32_t id, TokenId((*prompt)[i], absl::StrCat("prompt[", i, "]")));
    request.add_prompt_token_ids(id);
  }
  return absl::OkStatus();
}

// What a chat completion and /tokenize both read: the conversation, the
// tools, the template's variables, typed and as sent.
absl::Status ReadChat(const Json& body, v1::ChatRequest& chat, SentConversation& sent) {
  ASSIGN_OR_RETURN(std::vector<v1::ChatMessage> messages, ReadMessages(body));
  for (v1::ChatMessage& m : messages) *chat.add_messages() = std::move(m);
  ASSIGN_OR_RETURN(std::optional<bool> add_generation_prompt, Bool(body, "add_generation_prompt"));
  if (add_generation_prompt.has_value()) chat.set_add_generation_prompt(*add_generation_prompt);
  RETURN_IF_ERROR(ReadTools(body, chat));
  RETURN_IF_ERROR(ReadTemplateKwargs(body, chat));
  sent = SentAsTemplateSees(body);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionCall> ParseCompletionCall(Endpoint endpoint, std::string_view body) {
  ASSIGN_OR_RETURN(Json json, ParseObject(body));
  RETURN_IF_ERROR(RefuseUnsupported(json, endpoint));
  CompletionCall call;
  call.endpoint = endpoint;
  if (endpoint == Endpoint::kChat) {
    RETURN_IF_ERROR(ReadChat(json, call.chat, call.sent));
    RETURN_IF_ERROR(ReadToolChoice(json, call.chat));
    RETURN_IF_ERROR(ReadOptions(json, call, *call.chat.mutable_options()));
  } else {
    RETURN_IF_ERROR(ReadPrompt(json, call.completion));
    RETURN_IF_ERROR(ReadOptions(json, call, *call.completion.mutable_options()));
  }
  return call;
}

absl::StatusOr<TokenizeCall> ParseTokenizeCall(std::string_view body) {
  ASSIGN_OR_RETURN(Json json, ParseObject(body));
  TokenizeCall call;
  ASSIGN_OR_RETURN(std::optional<std::string> model, String(json, "model"));
  call.model = model.value_or("");
  const bool has_prompt = Field(json, "prompt") != nullptr;
  const bool has_messages = Field(json, "messages") != nullptr;
  if (has_prompt == has_messages) return Bad("prompt", "give exactly one of `prompt` (a string) or `messages`");
  if (has_prompt) {
    ASSIGN_OR_RETURN(std::optional<std::string> prompt, String(json, "prompt"));
    ASSIGN_OR_RETURN(std::optional<bool> add_special, Bool(json, "add_special_tokens"));
    v1::TokenizeRequest& r = call.prompt.emplace();
    r.set_model(call.model);
    r.set_text(*prompt);
    // What /v1/completions does with the same text: BOS as the vocabulary
    // asks, special-token texts kept as plain text.
    r.set_add_bos(add_special.value_or(true));
    return call;
  }
  v1::ChatRequest& chat = call.chat.emplace();
  RETURN_IF_ERROR(ReadChat(json, chat, call.sent));
  chat.mutable_options()->set_model(call.model);
  return call;
}

absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeCall(std::string_view body) {
  ASSIGN_OR_RETURN(Json json, ParseObject(body));
  v1::DetokenizeRequest request;
  ASSIGN_OR_RETURN(std::optional<std::string> model, String(json, "model"));
  request.set_model(model.value_or(""));
  const Json* tokens = Field(json, "tokens");
  if (tokens == nullptr || !tokens->is_array()) return Bad("tokens", "`tokens` must be a list of token ids");
  for (size_t i = 0; i < tokens->size(); ++i) {
    ASSIGN_OR_RETURN(int32_t id, TokenId((*tokens)[i], absl::StrCat("tokens[", i, "]")));
    request.add_token_ids(id);
  }
  return request;
}

void ApplyGenerationDefaults(std::optional<double> temperature, std::optional<double> top_p,
                             std::optional<int64_t> top_k, CompletionCall& call) {
  v1::GenerationOptions& options = call.endpoint == Endpoint::kChat ? *call.chat.mutable_options()
                                                                    : *call.completion.mutable_options();
  v1::SamplingParams& s = *options.mutable_sampling();
  if (!call.temperature_set && temperature.has_value()) s.set_temperature(static_cast<float>(*temperature));
  if (!call.top_p_set && top_p.has_value()) s.set_top_p(static_cast<float>(*top_p));
  if (!call.top_k_set && top_k.has_value() && *top_k > 0) s.set_top_k(static_cast<int32_t>(std::min<int64_t>(*top_k, INT32_MAX)));
}

std::string ErrorParam(const absl::Status& status) {
  auto param = status.GetPayload(kParamPayload);
  return param.has_value() ? std::string(*param) : std::string();
}

}  // namespace kvfleet::router::openai
