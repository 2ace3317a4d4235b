// The router's Prometheus metrics (docs/metrics.md lists each one):
// requests by method and status code, routing decisions by policy and
// reason, the prefix-match ratio each decision saw, retries before the
// first token, mid-stream resumptions, cachemanager fallbacks, prompt /
// cached / generated tokens, the client-visible TTFT, inter-token and
// end-to-end latencies, and the router's own overhead per request
// (arrival to the worker call). Worker counts are read from the pool at
// scrape time (WorkerPoolCollector).
//
// Labels are of low cardinality only (a method, a code, a policy, a reason).
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

#include "services/router/placement/decision.h"
#include "services/router/placement/placement_options.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

class RouterMetrics {
 public:
  RouterMetrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // `method` is the RPC name ("Generate"); `code` a gRPC code name in lower
  // case ("ok", "resource_exhausted").
  void RecordRequest(const std::string& method, const std::string& code);
  void RecordDecision(Policy policy, const Decision& decision);
  void RecordRetry();
  void RecordResumption();
  void RecordCacheManagerFallback();
  void RecordOverhead(double seconds);
  void RecordFirstToken(double seconds);
  void RecordInterToken(double seconds);
  void RecordFinished(double e2e_seconds, int64_t prompt_tokens, int64_t cached_prompt_tokens,
                      int64_t generated_tokens);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* decisions_;
  prometheus::Histogram* prefix_match_ratio_;
  prometheus::Counter* retries_;
  prometheus::Counter* resumptions_;
  prometheus::Counter* fallbacks_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_prompt_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* overhead_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* e2e_;
};

// kvfleet_router_workers{state} from the pool, at scrape time.
class WorkerPoolCollector : public prometheus::Collectable {
 public:
  explicit WorkerPoolCollector(const WorkerPool& pool) : pool_(pool) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const WorkerPool& pool_;
};

}  // namespace kvfleet::router
