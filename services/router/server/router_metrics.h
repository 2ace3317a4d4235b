// The router's Prometheus metrics (docs/metrics.md lists each one):
// requests by method and status code, routing decisions by policy and
// reason, the prefix-match ratio each decision saw, retries before the
// first token, mid-stream resumptions, cachemanager fallbacks, prompt /
// cached / generated tokens, the client-visible TTFT, inter-token and
// end-to-end latencies, and the router's own overhead per request
// (arrival to the worker call). Worker counts are read from the pool at
// scrape time (WorkerPoolCollector).
//
// Labels are of low cardinality only (a method, a code, an HTTP route and
// status, a policy, a reason, and `model` on every series about a model's
// requests: the models the workers serve),
// and `tenant` on the kvfleet_router_tenant_* families, bounded: the first
// `max_tenant_labels` tenants seen keep their name, later ones count as
// "other" (a token file may grow; a metrics backend should not). With auth
// off the tenant is "none".
//
// Thread-safety: every method is thread-safe (prometheus-cpp metrics are).
//
//   RouterMetrics metrics;
//   exposer.RegisterCollectable(metrics.registry());
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "services/router/placement/decision.h"
#include "services/router/placement/placement.h"
#include "services/router/placement/placement_options.h"
#include "services/router/placement/split_policy.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

// One model's series (label model="<id>"): what its requests cost and how
// fast they were served. Made at the model's first request and kept; the
// models a router serves bound the label.
class ModelMetrics {
 public:
  void RecordDecision(Policy policy, const Decision& decision);
  // Whether a request with a prefill worker live was split, and why.
  void RecordSplit(const SplitVerdict& verdict);
  void RecordRetry();
  void RecordResumption();
  void RecordOverhead(double seconds);
  // `split`: the first token came from a prefill worker (split_policy.h).
  void RecordFirstToken(double seconds, bool split = false);
  void RecordInterToken(double seconds);
  void RecordFinished(double e2e_seconds, int64_t prompt_tokens, int64_t cached_prompt_tokens,
                      int64_t generated_tokens);

 private:
  friend class RouterMetrics;
  prometheus::Family<prometheus::Counter>* decisions_;
  prometheus::Family<prometheus::Counter>* split_decisions_;
  prometheus::Counter* pulls_sent_;
  prometheus::Counter* pulls_declined_;
  prometheus::Histogram* prefix_match_ratio_;
  prometheus::Counter* retries_;
  prometheus::Counter* resumptions_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_prompt_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* overhead_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* ttft_split_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* e2e_;
  std::string model_;
};

class RouterMetrics {
 public:
  explicit RouterMetrics(int max_tenant_labels = 100);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // `method` is the RPC name ("Generate"); `code` a gRPC code name in lower
  // case ("ok", "resource_exhausted").
  void RecordRequest(const std::string& method, const std::string& code);
  // `endpoint` is the route ("/v1/chat/completions", "/v1/models/{id}",
  // "other" for any unknown path: the label stays bounded).
  void RecordHttpRequest(const std::string& endpoint, int status);
  void RecordCacheManagerFallback();
  // The series of model `model_id` (ModelMetrics), made on first use.
  ModelMetrics& Model(const std::string& model_id);
  // The tenant's share: its generating calls by code, their tokens, and
  // the calls its quotas refused (`quota` = requests, tokens, streams).
  void RecordTenantRequest(const std::string& tenant, const std::string& code);
  void RecordTenantTokens(const std::string& tenant, int64_t prompt_tokens, int64_t generated_tokens);
  void RecordQuotaRefusal(const std::string& tenant, const std::string& quota);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* http_requests_;
  prometheus::Family<prometheus::Counter>* decisions_;
  prometheus::Family<prometheus::Counter>* pull_decisions_;
  prometheus::Family<prometheus::Histogram>* prefix_match_ratio_;
  prometheus::Family<prometheus::Counter>* retries_;
  prometheus::Family<prometheus::Counter>* resumptions_;
  prometheus::Counter* fallbacks_;
  prometheus::Family<prometheus::Counter>* prompt_tokens_;
  prometheus::Family<prometheus::Counter>* cached_prompt_tokens_;
  prometheus::Family<prometheus::Counter>* generated_tokens_;
  prometheus::Family<prometheus::Histogram>* overhead_;
  prometheus::Family<prometheus::Histogram>* ttft_;
  prometheus::Family<prometheus::Counter>* split_decisions_;
  prometheus::Family<prometheus::Histogram>* inter_token_;
  prometheus::Family<prometheus::Histogram>* e2e_;
  prometheus::Family<prometheus::Counter>* tenant_requests_;
  prometheus::Family<prometheus::Counter>* tenant_tokens_;
  prometheus::Family<prometheus::Counter>* quota_refusals_;

  // The tenant's label value, "other" once the bound is reached.
  std::string TenantLabel(const std::string& tenant);
  const size_t max_tenant_labels_;
  absl::Mutex labels_mu_;
  absl::flat_hash_set<std::string> tenant_labels_ ABSL_GUARDED_BY(labels_mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<ModelMetrics>> models_ ABSL_GUARDED_BY(labels_mu_);
};

// kvfleet_router_workers{state} from the pool, at scrape time.
class WorkerPoolCollector : public prometheus::Collectable {
 public:
  explicit WorkerPoolCollector(const WorkerPool& pool) : pool_(pool) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const WorkerPool& pool_;
};

// The placement's own state at scrape time: decisions still counted as
// load the workers have not reported (kvfleet_router_placement_in_flight)
// and the (block, worker) pairs it remembers sending
// (kvfleet_router_placement_remembered_blocks).
class PlacementCollector : public prometheus::Collectable {
 public:
  explicit PlacementCollector(const Placement& placement) : placement_(placement) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Placement& placement_;
};

}  // namespace kvfleet::router
