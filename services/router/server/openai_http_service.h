// The OpenAI-compatible HTTP API on the router's HTTP port (--http-listen):
// routes each request to PublicApi (the same code the gRPC service calls,
// in the same process) through the openai/ translation, and records it by
// endpoint and status.
//
//   POST /v1/chat/completions   POST /v1/completions   (streamed as SSE or whole)
//   GET  /v1/models             GET  /v1/models/{id}
//   POST /tokenize              POST /detokenize       (vLLM's shapes)
//   GET  /health                (no token: 200 while a worker is routable, else 503)
//   POST /v1/load_lora_adapter  POST /v1/unload_lora_adapter  (vLLM's; an admin token, never a tenant's)
//
// Every other endpoint requires `Authorization: Bearer <token>` when the
// router has tenant tokens, exactly as gRPC does; the Host header is never
// used for anything. A generation runs under an HttpCallContext: the
// server's deadline (--http-request-timeout, 504 when it passes) and the
// client's disconnect cancel the worker call. A streamed response starts
// only with the first tokens, so an error before them (a bad request, a
// quota, no worker) is an ordinary HTTP error status; one after them is an
// error event in the stream, then `data: [DONE]`.
//
// Thread-safety: Handle is called from many threads at once (one per request).
//
//   OpenAiHttpService http(api, pool, metrics, {.request_timeout = std::chrono::minutes(10)});
//   HttpServer::Start(options, [&](const HttpRequest& r, HttpResponder& out) { http.Handle(r, out); });
#pragma once

#include <chrono>
#include <string>

#include "services/router/openai/openai_request.h"
#include "services/router/server/public_api.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/worker_pool.h"
#include "services/transport/http/http_server.h"

namespace kvfleet::router {

struct OpenAiHttpOptions {
  // HTTP carries no deadline: the longest a request may run.
  std::chrono::milliseconds request_timeout{600'000};
};

class OpenAiHttpService {
 public:
  OpenAiHttpService(PublicApi& api, const WorkerPool& pool, RouterMetrics& metrics, OpenAiHttpOptions options);

  void Handle(const transport::HttpRequest& request, transport::HttpResponder& out);

  // The body of the HTTP server's own errors (413, 431, ...), in OpenAI's shape.
  static std::string ErrorBody(int status, std::string_view message);

 private:
  // Returns the HTTP status sent.
  int Route(const transport::HttpRequest& request, transport::HttpResponder& out, std::string& endpoint);
  int Completions(openai::Endpoint endpoint, const transport::HttpRequest& request, const std::string& tenant,
                  transport::HttpResponder& out);
  int Tokenize(const transport::HttpRequest& request, transport::HttpResponder& out);
  int Detokenize(const transport::HttpRequest& request, transport::HttpResponder& out);
  int Models(const std::string& id, transport::HttpResponder& out);
  int Health(transport::HttpResponder& out);
  // POST /v1/load_lora_adapter (load) and /v1/unload_lora_adapter: admin only.
  int LoraAdmin(bool load, const transport::HttpRequest& request, transport::HttpResponder& out);
  // An error response: OpenAI's body, the status for `status`'s code.
  static int Fail(transport::HttpResponder& out, const absl::Status& status, transport::HttpHeaders headers = {});

  PublicApi& api_;
  const WorkerPool& pool_;
  RouterMetrics& metrics_;
  const OpenAiHttpOptions options_;
};

}  // namespace kvfleet::router
