#include "services/router/openai/openai_response.h"

#include "absl/strings/str_cat.h"

namespace kvfleet::router::openai {
namespace {

using Json = nlohmann::json;

// Token pieces may be part of a UTF-8 character: invalid bytes become U+FFFD
// in the text (the `bytes` field keeps them exact).
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Object keys are not replaced on output, so they are made valid first.
std::string ValidUtf8(const std::string& bytes) { return Json::parse(Dump(Json(bytes))).get<std::string>(); }

std::string Sse(const Json& j) { return absl::StrCat("data: ", Dump(j), "\n\n"); }

Json Bytes(const std::string& piece) {
  Json out = Json::array();
  for (unsigned char c : piece) out.push_back(static_cast<int>(c));
  return out;
}

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

Json ErrorJson(int status, std::string_view message, std::string_view param) {
  Json error = {{"message", std::string(message)}, {"type", ErrorType(status)}, {"code", status}};
  error["param"] = param.empty() ? Json(nullptr) : Json(std::string(param));
  return {{"error", std::move(error)}};
}

}  // namespace

CompletionFormatter::CompletionFormatter(const CompletionCall& call, std::string id, int64_t created, std::string model,
                                         const model::Tokenizer& tokenizer)
    : call_(call), id_(std::move(id)), created_(created), model_(std::move(model)), tokenizer_(tokenizer) {
  if (call_.endpoint == Endpoint::kChat) {
    logprobs_ = {{"content", Json::array()}};
  } else {
    logprobs_ = {{"tokens", Json::array()},
                 {"token_logprobs", Json::array()},
                 {"top_logprobs", Json::array()},
                 {"text_offset", Json::array()}};
  }
}

std::string CompletionFormatter::FinishReason(v1::FinishReason reason) {
  if (reason == v1::FINISH_REASON_TOOL_CALLS) return "tool_calls";
  return reason == v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

Json CompletionFormatter::Logprobs(const v1::GenerateTextResponse& message) {
  if (!call_.logprobs || message.logprobs_size() == 0) return nullptr;
  const auto piece = [&](int32_t id) {
    absl::StatusOr<std::string> p = tokenizer_.TokenToPiece(id);
    return p.ok() ? *p : std::string();
  };
  if (call_.endpoint == Endpoint::kChat) {
    Json content = Json::array();
    for (const v1::TokenLogprob& lp : message.logprobs()) {
      const std::string token = piece(lp.token_id());
      Json top = Json::array();
      for (const v1::TopLogprob& t : lp.top()) {
        if (static_cast<int32_t>(top.size()) >= call_.top_logprobs) break;
        const std::string alt = piece(t.token_id());
        top.push_back({{"token", alt}, {"logprob", t.logprob()}, {"bytes", Bytes(alt)}});
      }
      content.push_back({{"token", token}, {"logprob", lp.logprob()}, {"bytes", Bytes(token)}, {"top_logprobs", top}});
    }
    return {{"content", std::move(content)}};
  }
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const v1::TokenLogprob& lp : message.logprobs()) {
    const std::string token = piece(lp.token_id());
    Json top = Json::object();
    for (const v1::TopLogprob& t : lp.top()) {
      if (static_cast<int32_t>(top.size()) >= call_.top_logprobs) break;
      top[ValidUtf8(piece(t.token_id()))] = t.logprob();
    }
    out["tokens"].push_back(token);
    out["token_logprobs"].push_back(lp.logprob());
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(token.size());
  }
  return out;
}

Json CompletionFormatter::UsageJson() const {
  const int32_t prompt = usage_.prompt_tokens();
  const int32_t completion = usage_.generated_tokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", usage_.cached_prompt_tokens()}}}};
}

std::string CompletionFormatter::Event(Json choice) const {
  const bool chat = call_.endpoint == Endpoint::kChat;
  Json chunk = {{"id", id_},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", Json::array({std::move(choice)})}};
  if (call_.include_usage) chunk["usage"] = nullptr;
  return Sse(chunk);
}

std::string CompletionFormatter::StreamEvents(const v1::GenerateTextResponse& message) {
  const bool chat = call_.endpoint == Endpoint::kChat;
  std::string out;
  if (chat && !role_sent_) {
    role_sent_ = true;
    out += Event({{"index", 0},
                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  }
  Json logprobs = Logprobs(message);
  if (chat && !message.reasoning_text().empty()) {
    out += Event({{"index", 0},
                  {"delta", {{"reasoning_content", message.reasoning_text()}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  }
  if (!message.text().empty() || !logprobs.is_null()) {
    Json choice = {{"index", 0}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
    if (chat) {
      choice["delta"] = {{"content", message.text()}};
    } else {
      choice["text"] = message.text();
    }
    out += Event(std::move(choice));
  }
  // A call streams as OpenAI streams one: its id, type and name with empty
  // arguments, then the arguments (in one piece, or several as the model
  // writes them when the worker enforces the call's shape).
  for (const v1::ToolCallDelta& call : message.tool_calls()) {
    if (!call.name().empty()) {
      Json head = {{"index", call.index()},
                   {"id", call.id()},
                   {"type", "function"},
                   {"function", {{"name", call.name()}, {"arguments", ""}}}};
      out += Event({{"index", 0},
                    {"delta", {{"tool_calls", Json::array({head})}}},
                    {"logprobs", nullptr},
                    {"finish_reason", nullptr}});
    }
    if (call.arguments_delta().empty()) continue;
    Json args = {{"index", call.index()}, {"function", {{"arguments", call.arguments_delta()}}}};
    out += Event({{"index", 0},
                  {"delta", {{"tool_calls", Json::array({args})}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  }
  if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    usage_ = message.usage();
    Json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishReason(message.finish_reason())}};
    if (chat) {
      choice["delta"] = Json::object();
    } else {
      choice["text"] = "";
    }
    out += Event(std::move(choice));
  }
  return out;
}

std::string CompletionFormatter::StreamEnd() const {
  std::string out;
  if (call_.include_usage) {
    const bool chat = call_.endpoint == Endpoint::kChat;
    out += Sse({{"id", id_},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", Json::array()},
                {"usage", UsageJson()}});
  }
  out += "data: [DONE]\n\n";
  return out;
}

void CompletionFormatter::Add(const v1::GenerateTextResponse& message) {
  text_ += message.text();
  reasoning_ += message.reasoning_text();
  for (const v1::ToolCallDelta& call : message.tool_calls()) {
    if (call.index() >= static_cast<int32_t>(tool_calls_.size())) {
      tool_calls_.push_back(
          {{"id", call.id()}, {"type", "function"}, {"function", {{"name", call.name()}, {"arguments", ""}}}});
    }
    tool_calls_[call.index()]["function"]["arguments"] =
        tool_calls_[call.index()]["function"]["arguments"].get<std::string>() + call.arguments_delta();
  }
  Json logprobs = Logprobs(message);
  if (!logprobs.is_null()) {
    for (auto& [key, column] : logprobs.items()) {
      for (Json& v : column) logprobs_[key].push_back(std::move(v));
    }
  }
  if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    finish_reason_ = FinishReason(message.finish_reason());
    usage_ = message.usage();
  }
}

std::string CompletionFormatter::Body() const {
  const bool chat = call_.endpoint == Endpoint::kChat;
  Json choice = {{"index", 0},
                 {"logprobs", call_.logprobs ? logprobs_ : Json(nullptr)},
                 {"finish_reason", finish_reason_.empty() ? Json(nullptr) : Json(finish_reason_)}};
  if (chat) {
    // With tool calls and no text, content is null, as OpenAI returns it.
    choice["message"] = {{"role", "assistant"},
                         {"content", text_.empty() && !tool_calls_.empty() ? Json(nullptr) : Json(text_)}};
    if (!reasoning_.empty()) choice["message"]["reasoning_content"] = reasoning_;
    if (!tool_calls_.empty()) choice["message"]["tool_calls"] = tool_calls_;
  } else {
    choice["text"] = text_;
  }
  return Dump({{"id", id_},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", Json::array({std::move(choice)})},
               {"usage", UsageJson()}});
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;  // the client went; nobody reads it, but logs and metrics do
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorBody(int http_status, std::string_view message, std::string_view param) {
  return Dump(ErrorJson(http_status, message, param));
}

std::string StreamErrorEvent(int http_status, std::string_view message) {
  return Sse(ErrorJson(http_status, message, ""));
}

std::string TokenizeBody(const std::vector<int32_t>& ids, int32_t max_model_len) {
  return Dump({{"count", ids.size()}, {"max_model_len", max_model_len}, {"tokens", ids}});
}

std::string DetokenizeBody(const std::string& text) { return Dump({{"prompt", text}}); }

std::string HealthBody(int live_workers) {
  return Dump({{"status", live_workers > 0 ? "ok" : "no live workers"}, {"live_workers", live_workers}});
}

std::string ModelBody(const v1::ModelInfo& model, int64_t created) {
  // vLLM's shape: a base model is its own root; an adapter's parent is its base.
  return Dump({{"id", model.id()},
               {"object", "model"},
               {"created", created},
               {"owned_by", "kvfleet"},
               {"root", model.parent().empty() ? model.id() : model.parent()},
               {"parent", model.parent().empty() ? Json(nullptr) : Json(model.parent())},
               {"max_model_len", model.max_context()}});
}

std::string LoraAdapterChangeBody(const v1::LoraAdapterChange& change, bool loaded) {
  return Dump({{"object", loaded ? "lora_adapter.loaded" : "lora_adapter.unloaded"},
               {"lora_name", change.lora_name()},
               {"parent", change.parent()},
               {"digest", change.digest()},
               {"rank", change.rank()},
               {"workers", change.workers()},
               {"seconds", change.seconds()}});
}

std::string ModelListBody(const v1::ListModelsResponse& models, int64_t created) {
  Json data = Json::array();
  for (const v1::ModelInfo& m : models.models()) data.push_back(Json::parse(ModelBody(m, created)));
  return Dump({{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace kvfleet::router::openai
