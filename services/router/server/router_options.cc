#include "services/router/server/router_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"

namespace kvfleet::router {

namespace {

const char kUsageHead[] = R"(kvfleet-router: the public API (proto/kvfleet/v1/inference.proto)

  Without --model the router serves every model its workers serve, learning each one's tokenizer, chat
  template, context and name from its first worker (the worker's --served-model-name and --chat-template).
  --model PATH                 serve this model only, with the tokenizer, chat template and context read from
                               its GGUF file or Hugging Face checkpoint directory (the weights are not loaded);
                               workers of other models get no requests
  --model-id ID                with --model: must match the workers' (default: the file's name without its
                               extension, or the directory's name)
  --chat-template PATH         with --model: a Jinja chat template file that replaces the model's own (as
                               vLLM's); the router then renders every chat with it (default: the model's)
  --served-model-name NAME     with --model: the name clients give as `model` and listings show (default: the
                               model id; requests may also use the id)
  --http-listen HOST:PORT      also serve the OpenAI-compatible HTTP API there (/v1/chat/completions,
                               /v1/completions, /v1/models, /tokenize, /detokenize, /health); default: off.
                               The same TLS files, tenant tokens, quotas and limits as the gRPC port; the
                               body limit is --max-message-bytes and the header limit --max-metadata-bytes
  --http-request-timeout MS    the longest an HTTP request may run before it ends with 504 (HTTP carries
                               no deadline of its own; default 600000)
)";

const char kUsageTail[] =
    R"(  --cachemanager HOST:PORT     find workers and their cached prefixes through the cachemanager
  --workers H:P,H:P            or: a static list of workers (no prefix index; placement by its own memory)
  --policy NAME                prefix_aware (default), least_loaded or round_robin
  --prefill-weight A           cost per uncached prompt block (default 1; services/router/placement/README.md)
  --decode-weight B            cost per block of decode load (default 0.5)
  --decision-memory MS         how long the router trusts its own decisions as "this worker holds the
                               prefix" before the worker's events say so, while the worker's prefill
                               rate is unknown (default 5000; 0 turns the memory off)
  --decision-memory-min MS     with the rate known: this plus --decision-memory-factor times the
                               predicted prefill time (default 1000)
  --decision-memory-factor X   margin on the predicted prefill time (default 2)
  --decision-memory-max MS     the longest the router remembers a decision (default 600000)
  --in-flight-window MS        the longest a decision counts as load its worker has not reported; it
                               stops as soon as a load report includes it (default 60000)
  --affinity-guard-margin N    requests of imbalance before a hot prefix spills to another worker (default 16)
  --no-peer-pull               never ask a worker to pull a prompt's KV from a peer that holds more of it
  --peer-pull-bandwidth B      bytes/s a worker's first pull is priced at, before it has measured its own
                               (default 1e9)
  --split-min-uncached-tokens N  with prefill workers (--role prefill) live, a prompt with at least this many
                               tokens uncached at its decode worker is prefilled on a prefill worker and its
                               KV pulled by the decode worker (default 2048)
  --no-split                   never split a request's prefill from its decode
  --split-stream-first-token   send a split request's first token as soon as its prefill worker has it;
                               by default it waits for the decode worker, so the KV pull is part of the
                               time to first token rather than a gap between the first two tokens
  --max-attempts N             failures in a row before a request fails (default 3)
  --overlap-timeout MS         longest wait for the cachemanager per request before placing
                               least_loaded (default 100)
  --probe-interval MS          how often each worker's load is read (default 250)
  --auth-tokens FILE           require `authorization: Bearer <token>` on every call; FILE maps
                               sha256(token) in hex to a tenant, one "<digest> <tenant>" a line,
                               re-read when it changes. Each tenant's prefix cache is its own
  --admin-tokens FILE          admin bearer tokens (the --auth-tokens file's format: sha256 of each token and a
                               name): only an admin may load and unload LoRA adapters (POST
                               /v1/load_lora_adapter, /v1/unload_lora_adapter, and their gRPC twins)
  --admin-peers NAMES          with mutual TLS: client certificate names (comma-separated) that are admins over
                               gRPC
  --tenant-requests-per-second R  each tenant's request rate (default 0: no limit); over it,
                               RESOURCE_EXHAUSTED with a grpc-retry-pushback-ms trailer
  --tenant-request-burst N     requests a tenant may send at once (default: one second's worth)
  --tenant-tokens-per-second T each tenant's prompt + generated tokens per second (default 0: no limit)
  --tenant-token-burst N       tokens a tenant may spend at once (default: one second's worth)
  --tenant-max-streams N       generating calls a tenant may have in flight (default 0: no limit)
                               With auth off, all callers are one tenant
  --metrics-max-tenants N      tenants named in the tenant metrics; later ones are "other" (default 100)
  --worker-tls-name NAME       with --tls-ca: the name the workers' certificates must carry (they are
                               dialled by the address they advertise, e.g. a pod IP; default: that address)

Exactly one of --cachemanager or --workers. On start it prints
"kvfleet-router listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT][ http=HOST:PORT]", then
"kvfleet-router ready".
Readiness turns off once SIGTERM arrives; liveness stays on while the router serves.
)";

}  // namespace

std::string RouterUsage() {
  return absl::StrCat(kUsageHead, transport::TransportUsage(kRouterTransportDefaults, "kvfleet.v1.Inference"),
                      kUsageTail, limits::LimitsUsage());
}

absl::StatusOr<RouterOptions> ParseRouterOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      flags::Flags f,
      flags::Flags::Parse(args,
                          transport::WithTransportFlags(limits::WithLimitFlags({"model",
                                                                                "model-id",
                                                                                "cachemanager",
                                                                                "workers",
                                                                                "policy",
                                                                                "max-attempts",
                                                                                "overlap-timeout",
                                                                                "probe-interval",
                                                                                "prefill-weight",
                                                                                "decode-weight",
                                                                                "decision-memory",
                                                                                "decision-memory-min",
                                                                                "decision-memory-factor",
                                                                                "decision-memory-max",
                                                                                "in-flight-window",
                                                                                "affinity-guard-margin",
                                                                                "peer-pull-bandwidth",
                                                                                "split-min-uncached-tokens",
                                                                                "worker-tls-name",
                                                                                "auth-tokens",
                                                                                "admin-tokens",
                                                                                "admin-peers",
                                                                                "tenant-requests-per-second",
                                                                                "tenant-request-burst",
                                                                                "tenant-tokens-per-second",
                                                                                "tenant-token-burst",
                                                                                "tenant-max-streams",
                                                                                "metrics-max-tenants",
                                                                                "served-model-name",
                                                                                "chat-template",
                                                                                "http-listen",
                                                                                "http-request-timeout"})),
                          transport::WithTransportSwitches({"no-peer-pull", "no-split", "split-stream-first-token"})));
  RouterOptions o;
  o.model_path = f.GetString("model", "");
  o.model_id = f.GetString("model-id", "");
  o.served_model_name = f.GetString("served-model-name", "");
  o.chat_template_path = f.GetString("chat-template", "");
  if (o.model_path.empty()) {
    for (const char* only_with_model : {"model-id", "served-model-name", "chat-template"}) {
      if (f.Has(only_with_model)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", only_with_model,
                         " needs --model: without it the router learns each model from its workers, so "
                         "give the workers --",
                         only_with_model, " instead"));
      }
    }
  }
  o.http_listen = f.GetString("http-listen", "");
  ASSIGN_OR_RETURN(int64_t http_timeout_ms, f.GetInt("http-request-timeout", o.http_request_timeout.count()));
  if (http_timeout_ms < 1 || http_timeout_ms > 7 * 24 * 3600 * 1000LL) {
    return absl::InvalidArgumentError("--http-request-timeout must be between 1 ms and 7 days (604800000)");
  }
  o.http_request_timeout = std::chrono::milliseconds(http_timeout_ms);
  ASSIGN_OR_RETURN(o.transport, transport::ParseTransportOptions(f, kRouterTransportDefaults));
  ASSIGN_OR_RETURN(o.limits, limits::ParseRequestLimits(f));
  o.worker_tls_name = f.GetString("worker-tls-name", "");
  o.auth_tokens = f.GetString("auth-tokens", "");
  o.admin_tokens = f.GetString("admin-tokens", "");
  for (absl::string_view name : absl::StrSplit(f.GetString("admin-peers", ""), ',', absl::SkipWhitespace())) {
    o.admin_peers.emplace_back(name);
  }
  TenantQuotaOptions& q = o.quotas;
  ASSIGN_OR_RETURN(q.requests_per_second, f.GetDouble("tenant-requests-per-second", q.requests_per_second));
  ASSIGN_OR_RETURN(q.request_burst, f.GetDouble("tenant-request-burst", q.request_burst));
  ASSIGN_OR_RETURN(q.tokens_per_second, f.GetDouble("tenant-tokens-per-second", q.tokens_per_second));
  ASSIGN_OR_RETURN(q.token_burst, f.GetDouble("tenant-token-burst", q.token_burst));
  ASSIGN_OR_RETURN(q.max_streams, f.GetInt("tenant-max-streams", q.max_streams));
  RETURN_IF_ERROR(q.Validate());
  ASSIGN_OR_RETURN(int64_t max_tenants, f.GetInt("metrics-max-tenants", o.metrics_max_tenants));
  if (max_tenants < 0 || max_tenants > 10000) {
    return absl::InvalidArgumentError("--metrics-max-tenants must be in [0, 10000]");
  }
  o.metrics_max_tenants = static_cast<int>(max_tenants);
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
  ASSIGN_OR_RETURN(int64_t memory_min_ms, f.GetInt("decision-memory-min", p.decision_memory_min.count()));
  ASSIGN_OR_RETURN(int64_t memory_max_ms, f.GetInt("decision-memory-max", p.decision_memory_max.count()));
  ASSIGN_OR_RETURN(p.decision_memory_prefill_factor,
                   f.GetDouble("decision-memory-factor", p.decision_memory_prefill_factor));
  ASSIGN_OR_RETURN(int64_t in_flight_ms, f.GetInt("in-flight-window", p.in_flight_window.count()));
  ASSIGN_OR_RETURN(int64_t margin, f.GetInt("affinity-guard-margin", p.affinity_guard_margin));
  p.decision_memory = std::chrono::milliseconds(memory_ms);
  p.decision_memory_min = std::chrono::milliseconds(memory_min_ms);
  p.decision_memory_max = std::chrono::milliseconds(memory_max_ms);
  p.in_flight_window = std::chrono::milliseconds(in_flight_ms);
  p.affinity_guard_margin = static_cast<int32_t>(margin);
  p.peer_pull = !f.GetSwitch("no-peer-pull");
  ASSIGN_OR_RETURN(p.peer_pull_assumed_bytes_per_second,
                   f.GetDouble("peer-pull-bandwidth", p.peer_pull_assumed_bytes_per_second));
  RETURN_IF_ERROR(p.Validate());
  o.split.enabled = !f.GetSwitch("no-split");
  o.split_stream_first_token = f.GetSwitch("split-stream-first-token");
  ASSIGN_OR_RETURN(int64_t split_tokens, f.GetInt("split-min-uncached-tokens", o.split.min_uncached_tokens));
  if (split_tokens < 1 || split_tokens > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--split-min-uncached-tokens must be in [1, 2^30]");
  }
  o.split.min_uncached_tokens = static_cast<int32_t>(split_tokens);
  ASSIGN_OR_RETURN(int64_t attempts, f.GetInt("max-attempts", o.max_attempts));
  ASSIGN_OR_RETURN(int64_t overlap_ms, f.GetInt("overlap-timeout", o.overlap_timeout.count()));
  ASSIGN_OR_RETURN(int64_t probe_ms, f.GetInt("probe-interval", o.probe_interval.count()));
  if (attempts < 1 || overlap_ms < 1 || probe_ms < 10) {
    return absl::InvalidArgumentError(
        "--max-attempts must be >= 1, --overlap-timeout >= 1 ms and --probe-interval >= 10 ms");
  }
  o.max_attempts = static_cast<int>(attempts);
  o.overlap_timeout = std::chrono::milliseconds(overlap_ms);
  o.probe_interval = std::chrono::milliseconds(probe_ms);
  return o;
}

}  // namespace kvfleet::router
