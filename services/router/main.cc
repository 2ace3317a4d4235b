// kvfleet-router: wires the model front (tokenizer, chat template), the
// worker pool and its discovery, the placement policy, the runner, the
// public API and its two front ends (gRPC; OpenAI-compatible HTTP with
// --http-listen). Stateless: any number of routers may front the same
// workers. SIGTERM stops taking calls and lets those in flight finish.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/tokenizer/chat_template.h"
#include "services/router/frontend/router_model.h"
#include "services/router/placement/placement.h"
#include "services/router/server/cachemanager_watcher.h"
#include "services/router/server/generation_runner.h"
#include "services/router/server/inference_service.h"
#include "services/router/server/model_catalog.h"
#include "services/router/server/openai_http_service.h"
#include "services/router/server/public_api.h"
#include "services/router/server/route_selector.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/router_options.h"
#include "services/router/server/worker_pool.h"
#include "services/transport/grpc/grpc_channel.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/transport/http/http_server.h"
#include "services/transport/metrics/metrics_exposer.h"
#include "services/transport/service_main.h"
#include "services/transport/termination_signals.h"

namespace kvfleet::router {
namespace {

transport::ClientChannelOptions WorkerChannelOptions(const RouterOptions& o) {
  transport::ClientChannelOptions channel = transport::PeerChannelOptions(o.transport);
  channel.server_name = o.worker_tls_name;
  return channel;
}

absl::Status Run(const RouterOptions& o) {
  // --model: that model only, read from its file; otherwise learnt from the workers.
  std::shared_ptr<const RouterModel> fixed;
  if (!o.model_path.empty()) {
    std::string chat_template;
    if (!o.chat_template_path.empty()) {
      ASSIGN_OR_RETURN(chat_template, model::ReadChatTemplateFile(o.chat_template_path));
    }
    ASSIGN_OR_RETURN(fixed, RouterModel::Load(o.model_path, {.model_id = o.model_id,
                                                             .served_name = o.served_model_name,
                                                             .chat_template = std::move(chat_template)}));
  }
  ModelCatalog catalog({.fixed = fixed});
  RouterMetrics metrics(o.metrics_max_tenants);
  ASSIGN_OR_RETURN(std::unique_ptr<transport::MetricsExposer> exposer,
                   transport::StartMetricsExposer(o.transport.metrics_host, o.transport.metrics_port));
  exposer->RegisterCollectable(metrics.registry());

  WorkerPool pool({.admission = &catalog,
                   .observers = {&catalog},
                   .probe_interval = o.probe_interval,
                   .channel = WorkerChannelOptions(o)});
  // Keeps every worker of a model on the LoRA adapters admins loaded.
  AdapterAdmin adapter_admin(pool, {});
  pool.AddObserver(&adapter_admin);
  auto pool_collector = std::make_shared<WorkerPoolCollector>(pool);
  exposer->RegisterCollectable(pool_collector);
  Placement placement(o.placement);
  auto placement_collector = std::make_shared<PlacementCollector>(placement);
  exposer->RegisterCollectable(placement_collector);
  std::shared_ptr<grpc::Channel> cachemanager_channel;
  std::unique_ptr<CacheManagerWatcher> watcher;
  if (!o.cachemanager.empty()) {
    cachemanager_channel = transport::CreateClientChannel(o.cachemanager, transport::PeerChannelOptions(o.transport));
    // Every model's workers, or the --model's only.
    watcher = std::make_unique<CacheManagerWatcher>(cachemanager_channel, fixed ? fixed->id() : "", pool,
                                                    [&placement](const std::string& id) { placement.Forget(id); });
  }
  for (const std::string& w : o.workers) pool.Upsert(w, w, /*incarnation=*/0);
  RouteSelector selector(pool, placement, cachemanager_channel, metrics,
                         {.overlap_timeout = o.overlap_timeout, .split = o.split});
  GenerationRunner runner(
      selector, pool, metrics,
      {.max_attempts = o.max_attempts, .stream_first_token_before_handoff = o.split_stream_first_token});
  std::unique_ptr<TenantTokens> tokens;
  if (!o.auth_tokens.empty()) {
    ASSIGN_OR_RETURN(tokens, TenantTokens::Load(o.auth_tokens));
  }
  std::unique_ptr<TenantQuotas> quotas;
  if (o.quotas.any()) quotas = std::make_unique<TenantQuotas>(o.quotas);
  PublicApi api(catalog, runner, pool, metrics, tokens.get(), o.limits, quotas.get());
  ASSIGN_OR_RETURN(std::unique_ptr<AdminIdentity> admins,
                   AdminIdentity::Create({.tokens_path = o.admin_tokens, .peers = o.admin_peers}));
  api.SetAdapterAdmin(&adapter_admin, admins.get());
  InferenceService service(api, metrics);
  OpenAiHttpService http_service(api, pool, metrics, {.request_timeout = o.http_request_timeout});

  pool.Start();
  if (watcher) watcher->Start();
  transport::GrpcServerOptions server_options =
      transport::ServerOptionsFrom(o.transport, {&service}, "kvfleet.v1.Inference");
  // The public port answers to tenant tokens; the internal token is only
  // what this router sends its workers and the cachemanager.
  server_options.internal_token.clear();
  ASSIGN_OR_RETURN(transport::RunningServer server, transport::StartGrpcServer(server_options));
  std::unique_ptr<transport::HttpServer> http;
  if (!o.http_listen.empty()) {
    ASSIGN_OR_RETURN(
        http, transport::HttpServer::Start(
                  {.listen = o.http_listen,
                   .tls = o.transport.tls,
                   .allowed_peers = o.transport.tls_allowed_peers,
                   .max_header_bytes = static_cast<size_t>(o.transport.max_metadata_bytes),
                   .max_body_bytes = static_cast<size_t>(o.transport.max_message_bytes),
                   .max_active_requests = o.transport.max_concurrent_streams,
                   .error_body = OpenAiHttpService::ErrorBody,
                   .error_content_type = "application/json",
                   .on_server_answer = [&metrics](int status) { metrics.RecordHttpRequest("unrouted", status); }},
                  [&http_service](const transport::HttpRequest& r, transport::HttpResponder& out) {
                    http_service.Handle(r, out);
                  }));
  }
  transport::PrintListening("kvfleet-router", server, o.transport.metrics_host, exposer->port(),
                            http ? http->address() : "");
  server.SetLive(true);
  server.SetReady(true);
  KVFLEET_LOG_INFO("routing {} ({} policy) on {}; workers from {}",
                   fixed ? "model " + fixed->id() : std::string("every model its workers serve"),
                   PolicyName(o.placement.policy), server.address,
                   o.cachemanager.empty() ? "--workers" : "cachemanager " + o.cachemanager);
  std::printf("kvfleet-router ready\n");
  std::fflush(stdout);

  const int sig = transport::TerminationSignals::Wait();
  KVFLEET_LOG_INFO("received signal {}: finishing the calls in flight", sig);
  server.SetReady(false);
  const auto drain_deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
  if (http) http->Shutdown(drain_deadline);
  server.Shutdown(drain_deadline);
  if (watcher) watcher->Stop();
  pool.Stop();
  exposer->RemoveCollectable(pool_collector);
  exposer->RemoveCollectable(placement_collector);
  KVFLEET_LOG_INFO("stopped");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::router

int main(int argc, char** argv) {
  return kvfleet::transport::ServiceMain(argc, argv, "kvfleet-router", kvfleet::router::RouterUsage(),
                                         kvfleet::router::ParseRouterOptions, kvfleet::router::Run);
}
