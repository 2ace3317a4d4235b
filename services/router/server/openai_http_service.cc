#include "services/router/server/openai_http_service.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "services/router/openai/openai_response.h"
#include "services/router/openai/request_fields.h"
#include "services/router/server/generation_plan.h"
#include "services/router/server/http_call_context.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::router {
namespace {

using transport::HttpHeaders;
using transport::HttpRequest;
using transport::HttpResponder;

constexpr char kJson[] = "application/json";

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "chatcmpl-" and 24 random hex digits, as OpenAI's ids look.
std::string NewId(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(prefix, absl::Hex(rng(), absl::kZeroPad16), absl::Hex(rng() >> 32, absl::kZeroPad8));
}

int Send(HttpResponder& out, int status, std::string body, HttpHeaders headers = {}) {
  out.Respond(status, kJson, std::move(body), std::move(headers));
  return status;
}

}  // namespace

OpenAiHttpService::OpenAiHttpService(PublicApi& api, const WorkerPool& pool, RouterMetrics& metrics,
                                     OpenAiHttpOptions options)
    : api_(api), pool_(pool), metrics_(metrics), options_(options) {}

std::string OpenAiHttpService::ErrorBody(int status, std::string_view message) {
  return openai::ErrorBody(status, message);
}

int OpenAiHttpService::Fail(HttpResponder& out, const absl::Status& status, HttpHeaders headers) {
  const int http = openai::HttpStatusFor(status.code());
  return Send(out, http, openai::ErrorBody(http, std::string(status.message()), openai::ErrorParam(status)),
              std::move(headers));
}

void OpenAiHttpService::Handle(const HttpRequest& request, HttpResponder& out) {
  std::string endpoint = "other";
  const int status = Route(request, out, endpoint);
  metrics_.RecordHttpRequest(endpoint, status);
}

int OpenAiHttpService::Route(const HttpRequest& request, HttpResponder& out, std::string& endpoint) {
  const std::string& path = request.path;
  struct Known {
    const char* path;
    const char* method;
  };
  static constexpr Known kRoutes[] = {{"/v1/chat/completions", "POST"},
                                      {"/v1/completions", "POST"},
                                      {"/v1/models", "GET"},
                                      {"/tokenize", "POST"},
                                      {"/detokenize", "POST"},
                                      {"/health", "GET"},
                                      {"/v1/load_lora_adapter", "POST"},
                                      {"/v1/unload_lora_adapter", "POST"}};
  const char* method = nullptr;
  for (const Known& k : kRoutes) {
    if (path == k.path) {
      endpoint = k.path;
      method = k.method;
    }
  }
  std::string model_id;
  if (method == nullptr && absl::StartsWith(path, "/v1/models/") && path.size() > 11) {
    endpoint = "/v1/models/{id}";
    method = "GET";
    model_id = path.substr(11);  // ids may hold '/', as "org/model" does
  }
  if (method == nullptr) {
    return Send(out, 404,
                openai::ErrorBody(404, absl::StrCat("no endpoint ", request.method, " ", path,
                                                    "; this server has /v1/chat/completions, /v1/completions, "
                                                    "/v1/models, /tokenize, /detokenize, /health, "
                                                    "/v1/load_lora_adapter and /v1/unload_lora_adapter")));
  }
  if (request.method != method) {
    return Send(out, 405, openai::ErrorBody(405, absl::StrCat(path, " takes ", method, ", not ", request.method)),
                {{"Allow", method}});
  }
  if (endpoint == "/health") return Health(out);
  // Admin calls carry an admin token, not a tenant's.
  if (endpoint == "/v1/load_lora_adapter" || endpoint == "/v1/unload_lora_adapter") {
    return LoraAdmin(endpoint == "/v1/load_lora_adapter", request, out);
  }
  absl::StatusOr<std::string> tenant = api_.Authenticate(request.Header("authorization"));
  if (!tenant.ok()) return Fail(out, tenant.status(), {{"WWW-Authenticate", "Bearer"}});
  if (endpoint == "/v1/chat/completions") return Completions(openai::Endpoint::kChat, request, *tenant, out);
  if (endpoint == "/v1/completions") return Completions(openai::Endpoint::kCompletion, request, *tenant, out);
  if (endpoint == "/tokenize") return Tokenize(request, out);
  if (endpoint == "/detokenize") return Detokenize(request, out);
  return Models(model_id, out);
}

int OpenAiHttpService::Completions(openai::Endpoint endpoint, const HttpRequest& request, const std::string& tenant,
                                   HttpResponder& out) {
  const auto arrival = PublicApi::Clock::now();
  absl::StatusOr<openai::CompletionCall> parsed = openai::ParseCompletionCall(endpoint, request.body);
  if (!parsed.ok()) return Fail(out, parsed.status());
  openai::CompletionCall& call = *parsed;
  const bool chat = endpoint == openai::Endpoint::kChat;
  v1::GenerationOptions& options = chat ? *call.chat.mutable_options() : *call.completion.mutable_options();
  // The named model's defaults and tokenizer shape the request and the answer.
  absl::StatusOr<ServedModel> served = api_.Resolve(options.model());
  if (!served.ok()) return Fail(out, served.status());
  const RouterModel& model = *served->model;
  const model::GenerationDefaults& defaults = model.generation_defaults();
  openai::ApplyGenerationDefaults(defaults.temperature, defaults.top_p, defaults.top_k, call);
  const std::string id = NewId(chat ? "chatcmpl-" : "cmpl-");
  options.set_request_id(id);
  if (!call.user.empty()) KVFLEET_LOG_INFO("HTTP {} for user '{}' from {}", id, call.user, request.peer);

  auto context = std::make_shared<HttpCallContext>(std::chrono::system_clock::now() + options_.request_timeout);
  out.OnClientGone([context] { context->Cancel(); });
  // The name the client asked for: an adapter's own, not its base's.
  openai::CompletionFormatter formatter(call, id, UnixSeconds(),
                                        served->lora.empty() ? model.served_name() : served->lora, model.tokenizer());
  bool started = false;
  const PublicApi::Sink sink = [&](const v1::GenerateTextResponse& message) {
    if (!call.stream) {
      formatter.Add(message);
      return !context->IsCancelled();
    }
    if (!started) {
      started = true;
      out.StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    }
    return out.Write(formatter.StreamEvents(message));
  };
  PublicApi::Outcome outcome = chat ? api_.Chat(*context, tenant, call.chat, arrival, sink, &call.sent, &*served)
                                    : api_.Generate(*context, tenant, call.completion, arrival, sink, &*served);
  absl::Status status = transport::FromGrpcStatus(outcome.status);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    status = absl::DeadlineExceededError(
        absl::StrCat("the request did not finish within the server's HTTP request timeout (",
                     options_.request_timeout.count(), " ms, --http-request-timeout); ask for fewer tokens"));
  }
  if (status.ok()) {
    if (call.stream) {
      out.Write(formatter.StreamEnd());
      return 200;
    }
    return Send(out, 200, formatter.Body());
  }
  if (started) {
    // The head said 200; the metrics record how the stream ended (499: the client went).
    out.Write(openai::StreamErrorEvent(openai::HttpStatusFor(status.code()), std::string(status.message())));
    out.Write("data: [DONE]\n\n");
    return openai::HttpStatusFor(status.code());
  }
  HttpHeaders headers;
  if (outcome.retry_after.has_value()) {
    const int64_t ms = outcome.retry_after->count();
    headers.emplace_back("Retry-After", std::to_string((ms + 999) / 1000));
    headers.emplace_back("retry-after-ms", std::to_string(ms));
  }
  return Fail(out, status, std::move(headers));
}

int OpenAiHttpService::Tokenize(const HttpRequest& request, HttpResponder& out) {
  absl::StatusOr<openai::TokenizeCall> call = openai::ParseTokenizeCall(request.body);
  if (!call.ok()) return Fail(out, call.status());
  absl::StatusOr<ServedModel> served = api_.Resolve(call->model);
  if (!served.ok()) return Fail(out, served.status());
  std::vector<int32_t> ids;
  if (call->prompt.has_value()) {
    absl::StatusOr<v1::TokenizeResponse> r = api_.Tokenize(*call->prompt);
    if (!r.ok()) return Fail(out, r.status());
    ids.assign(r->token_ids().begin(), r->token_ids().end());
  } else {
    absl::StatusOr<std::vector<int32_t>> r = api_.TokenizeChat(*call->chat, &call->sent);
    if (!r.ok()) return Fail(out, r.status());
    ids = *std::move(r);
  }
  return Send(out, 200, openai::TokenizeBody(ids, served->model->context_length()));
}

int OpenAiHttpService::Detokenize(const HttpRequest& request, HttpResponder& out) {
  absl::StatusOr<v1::DetokenizeRequest> call = openai::ParseDetokenizeCall(request.body);
  if (!call.ok()) return Fail(out, call.status());
  absl::StatusOr<v1::DetokenizeResponse> r = api_.Detokenize(*call);
  if (!r.ok()) return Fail(out, r.status());
  return Send(out, 200, openai::DetokenizeBody(r->text()));
}

int OpenAiHttpService::Models(const std::string& id, HttpResponder& out) {
  const v1::ListModelsResponse models = api_.ListModels();
  if (id.empty()) return Send(out, 200, openai::ModelListBody(models, UnixSeconds()));
  absl::StatusOr<ServedModel> served = api_.Resolve(id);
  if (!served.ok()) return Fail(out, served.status());
  const std::string name = served->lora.empty() ? served->model->served_name() : served->lora;
  for (const v1::ModelInfo& m : models.models()) {
    if (m.id() == name) return Send(out, 200, openai::ModelBody(m, UnixSeconds()));
  }
  // Known, with no live worker now: requests for it get 503 until one returns.
  return Fail(out, absl::UnavailableError(
                       absl::StrCat("model '", served->model->served_name(), "' has no live worker now; retry later")));
}

int OpenAiHttpService::LoraAdmin(bool load, const HttpRequest& request, HttpResponder& out) {
  // vLLM's bodies: {"lora_name": ..., "lora_path": ...}; "model" names the base when the router serves several.
  const openai::Json body = openai::Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  const auto field = [&](const char* key) -> absl::StatusOr<std::string> {
    if (!body.is_object() || !body.contains(key) || body[key].is_null()) return std::string();
    if (!body[key].is_string()) return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a string"));
    return body[key].get<std::string>();
  };
  if (!body.is_object()) {
    return Fail(
        out, absl::InvalidArgumentError(
                 "the body must be a JSON object such as {\"lora_name\": \"sql\", \"lora_path\": \"/adapters/sql\"}"));
  }
  absl::StatusOr<std::string> model = field("model"), name = field("lora_name"), path = field("lora_path");
  for (const absl::StatusOr<std::string>* f : {&model, &name, &path}) {
    if (!f->ok()) return Fail(out, f->status());
  }
  absl::StatusOr<v1::LoraAdapterChange> change;
  if (load) {
    v1::LoraAdapterLoad call;
    call.set_model(*model);
    call.set_lora_name(*name);
    call.set_lora_path(*path);
    change = api_.LoadLoraAdapter(request.Header("authorization"), {}, call);
  } else {
    v1::LoraAdapterUnload call;
    call.set_model(*model);
    call.set_lora_name(*name);
    change = api_.UnloadLoraAdapter(request.Header("authorization"), {}, call);
  }
  if (!change.ok()) return Fail(out, change.status());
  return Send(out, 200, openai::LoraAdapterChangeBody(*change, load));
}

int OpenAiHttpService::Health(HttpResponder& out) {
  const int live = pool_.Counts().routable;
  return Send(out, live > 0 ? 200 : 503, openai::HealthBody(live));
}

}  // namespace kvfleet::router
