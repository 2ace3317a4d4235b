#include "services/router/server/router_options.h"

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "services/transport/service_main.h"

namespace kvfleet::router {

const char kRouterUsage[] = R"(kvfleet-router: the public API (proto/kvfleet/v1/inference.proto)

  --model PATH                the model's GGUF file: its tokenizer, chat template and context (required;
                              the weights are not loaded)
  --model-id ID               must match the workers' (default: file name without .gguf)
  --listen HOST:PORT          gRPC address (default 127.0.0.1:50060; port 0 picks a free one)
  --metrics-port N            Prometheus /metrics port (default 9466; 0 picks a free one)
  --metrics-host HOST         (default 0.0.0.0; the health port binds here too)
  --health-port N             also serve grpc.health.v1, and nothing else, in plaintext on this port, for
                              probes that cannot speak TLS (Kubernetes): readiness "" and kvfleet.v1.Inference
                              (off once SIGTERM arrives), liveness "liveness". Default: none; 0 picks a free one
  --cachemanager HOST:PORT    find workers and their cached prefixes through the cachemanager
  --workers H:P,H:P           or: a static list of workers (no prefix index; placement by its own memory)
  --policy NAME               prefix_aware (default), least_loaded or round_robin
  --prefill-weight A          cost per uncached prompt block (default 1; services/router/placement/README.md)
  --decode-weight B           cost per block of decode load (default 1)
  --decision-memory MS        how long the router trusts its own decisions as "this worker holds the
                              prefix" before the worker's events say so (default 5000; raise it where
                              a cold prefill takes longer, e.g. CPU workers)
  --in-flight-window MS       how long a decision counts as load its worker has not reported (default 250)
  --affinity-guard-margin N   requests of imbalance before a hot prefix spills to another worker (default 16)
  --max-attempts N            failures in a row before a request fails (default 3)
  --overlap-timeout MS        longest wait for the cachemanager per request before placing
                              least_loaded (default 100)
  --probe-interval MS         how often each worker's load is read (default 250)
  --max-message-bytes N       largest request accepted (default 4194304)
  --log-level LEVEL           trace, debug, info, warn, error (default info)

Exactly one of --cachemanager or --workers. On start it prints
"kvfleet-router listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT]", then "kvfleet-router ready".
)";

absl::StatusOr<RouterOptions> ParseRouterOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f,
                   flags::Flags::Parse(args,
                                       {"model", "model-id", "listen", "metrics-port", "metrics-host", "health-port", "cachemanager",
                                        "workers", "policy", "max-attempts", "overlap-timeout", "probe-interval",
                                        "max-message-bytes", "log-level", "prefill-weight", "decode-weight",
                                        "decision-memory", "in-flight-window", "affinity-guard-margin"},
                                       {}));
  RouterOptions o;
  ASSIGN_OR_RETURN(o.model_path, f.GetString("model"));
  o.model_id = f.GetString("model-id", "");
  o.listen = f.GetString("listen", o.listen);
  o.metrics_host = f.GetString("metrics-host", o.metrics_host);
  ASSIGN_OR_RETURN(int64_t metrics_port, f.GetInt("metrics-port", o.metrics_port));
  o.metrics_port = static_cast<int>(metrics_port);
  ASSIGN_OR_RETURN(o.health_port, transport::ParseHealthPort(f));
  o.cachemanager = f.GetString("cachemanager", "");
  for (absl::string_view w : absl::StrSplit(f.GetString("workers", ""), ',', absl::SkipWhitespace())) {
    o.workers.emplace_back(absl::StripAsciiWhitespace(w));
  }
  if (o.cachemanager.empty() == o.workers.empty()) {
    return absl::InvalidArgumentError("give exactly one of --cachemanager HOST:PORT or --workers H:P,H:P");
  }
  if (f.Has("policy")) {
    ASSIGN_OR_RETURN(o.placement.policy, ParsePolicy(f.GetString("policy", "")));
  }
  PlacementOptions& p = o.placement;
  ASSIGN_OR_RETURN(p.prefill_weight, f.GetDouble("prefill-weight", p.prefill_weight));
  ASSIGN_OR_RETURN(p.decode_weight, f.GetDouble("decode-weight", p.decode_weight));
  ASSIGN_OR_RETURN(int64_t memory_ms, f.GetInt("decision-memory", p.decision_memory.count()));
  ASSIGN_OR_RETURN(int64_t in_flight_ms, f.GetInt("in-flight-window", p.in_flight_window.count()));
  ASSIGN_OR_RETURN(int64_t margin, f.GetInt("affinity-guard-margin", p.affinity_guard_margin));
  p.decision_memory = std::chrono::milliseconds(memory_ms);
  p.in_flight_window = std::chrono::milliseconds(in_flight_ms);
  p.affinity_guard_margin = static_cast<int32_t>(margin);
  RETURN_IF_ERROR(p.Validate());
  ASSIGN_OR_RETURN(int64_t attempts, f.GetInt("max-attempts", o.max_attempts));
  ASSIGN_OR_RETURN(int64_t overlap_ms, f.GetInt("overlap-timeout", o.overlap_timeout.count()));
  ASSIGN_OR_RETURN(int64_t probe_ms, f.GetInt("probe-interval", o.probe_interval.count()));
  ASSIGN_OR_RETURN(int64_t message_bytes, f.GetInt("max-message-bytes", o.max_message_bytes));
  if (attempts < 1 || overlap_ms < 1 || probe_ms < 10 || message_bytes < 1024) {
    return absl::InvalidArgumentError(
        "--max-attempts must be >= 1, --overlap-timeout >= 1 ms, --probe-interval >= 10 ms and "
        "--max-message-bytes >= 1024");
  }
  o.max_attempts = static_cast<int>(attempts);
  o.overlap_timeout = std::chrono::milliseconds(overlap_ms);
  o.probe_interval = std::chrono::milliseconds(probe_ms);
  o.max_message_bytes = static_cast<int32_t>(message_bytes);
  o.log_level = f.GetString("log-level", o.log_level);
  return o;
}

}  // namespace kvfleet::router
