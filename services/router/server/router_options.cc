#include "services/router/server/router_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"

namespace kvfleet::router {

namespace {

const char kUsageHead[] = R"(kvfleet-router: the public API (proto/kvfleet/v1/inference.proto)

  --model PATH                 the model's GGUF file: its tokenizer, chat template and context (required;
                               the weights are not loaded)
  --model-id ID                must match the workers' (default: file name without .gguf)
)";

const char kUsageTail[] = R"(  --cachemanager HOST:PORT     find workers and their cached prefixes through the cachemanager
  --workers H:P,H:P            or: a static list of workers (no prefix index; placement by its own memory)
  --policy NAME                prefix_aware (default), least_loaded or round_robin
  --prefill-weight A           cost per uncached prompt block (default 1; services/router/placement/README.md)
  --decode-weight B            cost per block of decode load (default 1)
  --decision-memory MS         how long the router trusts its own decisions as "this worker holds the
                               prefix" before the worker's events say so (default 5000; raise it where
                               a cold prefill takes longer, e.g. CPU workers)
  --in-flight-window MS        how long a decision counts as load its worker has not reported (default 250)
  --affinity-guard-margin N    requests of imbalance before a hot prefix spills to another worker (default 16)
  --max-attempts N             failures in a row before a request fails (default 3)
  --overlap-timeout MS         longest wait for the cachemanager per request before placing
                               least_loaded (default 100)
  --probe-interval MS          how often each worker's load is read (default 250)
  --max-message-bytes N        largest request accepted (default 4194304)
  --auth-tokens FILE           require `authorization: Bearer <token>` on every call; FILE maps
                               sha256(token) in hex to a tenant, one "<digest> <tenant>" a line,
                               re-read when it changes. Each tenant's prefix cache is its own
  --worker-tls-name NAME       with --tls-ca: the name the workers' certificates must carry (they are
                               dialled by the address they advertise, e.g. a pod IP; default: that address)

Exactly one of --cachemanager or --workers. On start it prints
"kvfleet-router listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT]", then "kvfleet-router ready".
Readiness turns off once SIGTERM arrives; liveness stays on while the router serves.
)";

}  // namespace

std::string RouterUsage() {
  return absl::StrCat(kUsageHead, transport::TransportUsage(kRouterTransportDefaults, "kvfleet.v1.Inference"),
                      kUsageTail);
}

absl::StatusOr<RouterOptions> ParseRouterOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f,
                   flags::Flags::Parse(args,
                                       transport::WithTransportFlags(
                                           {"model", "model-id", "cachemanager", "workers", "policy", "max-attempts",
                                            "overlap-timeout", "probe-interval", "max-message-bytes",
                                            "prefill-weight", "decode-weight", "decision-memory",
                                            "in-flight-window", "affinity-guard-margin", "worker-tls-name",
                                            "auth-tokens"}),
                                       transport::WithTransportSwitches({})));
  RouterOptions o;
  ASSIGN_OR_RETURN(o.model_path, f.GetString("model"));
  o.model_id = f.GetString("model-id", "");
  ASSIGN_OR_RETURN(o.transport, transport::ParseTransportOptions(f, kRouterTransportDefaults));
  o.worker_tls_name = f.GetString("worker-tls-name", "");
  o.auth_tokens = f.GetString("auth-tokens", "");
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
  return o;
}

}  // namespace kvfleet::router
