// The router process's configuration, from its command line.
//
//   ASSIGN_OR_RETURN(RouterOptions o, ParseRouterOptions(args));
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/limits/request_limits.h"
#include "services/router/frontend/tenant_quota.h"
#include "services/router/placement/placement_options.h"
#include "services/router/placement/split_policy.h"
#include "services/transport/transport_options.h"

namespace kvfleet::router {

inline const transport::TransportOptions kRouterTransportDefaults{
    .listen = "127.0.0.1:50060", .metrics_port = 9466, .max_message_bytes = 4 << 20};

struct RouterOptions {
  std::string model_path;  // empty: every model the workers serve, learnt from them
  std::string model_id;    // empty: the model file's name without .gguf (as the worker)
  transport::TransportOptions transport = kRouterTransportDefaults;
  std::string cachemanager;          // host:port: workers from its WatchWorkers
  std::vector<std::string> workers;  // or a static list of worker addresses
  PlacementOptions placement;
  SplitOptions split;                     // prefill on prefill workers, decode on decode workers
  bool split_stream_first_token = false;  // GenerationRunnerOptions::stream_first_token_before_handoff
  int max_attempts = 3;
  std::chrono::milliseconds overlap_timeout{100};
  std::chrono::milliseconds probe_interval{250};
  // The name workers' TLS certificates must carry: they are dialled by the
  // address they advertise (a pod IP), which certificates do not name.
  // Empty: the address's host itself.
  std::string worker_tls_name;
  std::string auth_tokens;  // the tenants' token file; empty: no auth on the public API
  // The admin identity (admin_identity.h): its token file, and the client
  // certificate names that are admins over gRPC with mutual TLS.
  std::string admin_tokens;
  std::vector<std::string> admin_peers;
  limits::RequestLimits limits;
  TenantQuotaOptions quotas;      // per tenant ("" with auth off); all 0: none
  int metrics_max_tenants = 100;  // distinct `tenant` label values before "other"
  // The OpenAI-compatible HTTP port (services/router/server/openai_http_service.h);
  // empty: none. It shares the gRPC port's TLS files, tokens, quotas and limits.
  std::string http_listen;
  std::chrono::milliseconds http_request_timeout{600'000};
  std::string served_model_name;   // the model's name for clients; empty: the model id
  std::string chat_template_path;  // a template replacing the model's; empty: the model's
};

// --help: the router's flags and the shared transport flags.
std::string RouterUsage();

absl::StatusOr<RouterOptions> ParseRouterOptions(const std::vector<std::string>& args);

}  // namespace kvfleet::router
