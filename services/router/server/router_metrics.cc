#include "services/router/server/router_metrics.h"

#include "services/transport/registry_metrics.h"
#include "services/transport/scrape_families.h"

namespace kvfleet::router {
using transport::AddCounter;
using transport::AddHistogram;

RouterMetrics::RouterMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("kvfleet_router_requests_total")
                   .Help("Finished calls of the public API, by method and gRPC status code")
                   .Register(r);
  decisions_ = &prometheus::BuildCounter()
                    .Name("kvfleet_router_routing_decisions_total")
                    .Help("Placement decisions, by the policy applied and the reason for the choice")
                    .Register(r);
  prefix_match_ratio_ =
      AddHistogram(r, "kvfleet_router_prefix_match_ratio",
                   "Share of the prompt's full blocks the chosen worker held (or was recently sent) at decision time",
                   {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0});
  retries_ = AddCounter(r, "kvfleet_router_retries_total",
                        "Requests sent to another worker after one failed before their first token");
  resumptions_ = AddCounter(r, "kvfleet_router_resumptions_total",
                            "Streams resumed on another worker after theirs failed mid-generation");
  fallbacks_ = AddCounter(r, "kvfleet_router_cachemanager_fallbacks_total",
                          "Decisions made least_loaded because the cachemanager could not be asked");
  prompt_tokens_ = AddCounter(r, "kvfleet_router_prompt_tokens_total", "Prompt tokens of finished requests");
  cached_prompt_tokens_ = AddCounter(r, "kvfleet_router_cached_prompt_tokens_total",
                                     "Prompt tokens of finished requests the worker served from its prefix cache");
  generated_tokens_ = AddCounter(r, "kvfleet_router_generated_tokens_total", "Tokens streamed to clients");
  overhead_ = AddHistogram(r, "kvfleet_router_overhead_seconds",
                           "From a call's arrival to its request leaving for a worker: tokenization, hashing, "
                           "the cachemanager lookup and the decision",
                           transport::OverheadBuckets());
  ttft_ = AddHistogram(r, "kvfleet_router_time_to_first_token_seconds",
                       "From a call's arrival to its first token reaching the client", transport::TtftBuckets());
  inter_token_ =
      AddHistogram(r, "kvfleet_router_inter_token_latency_seconds",
                   "Between consecutive messages of tokens sent to a client", transport::InterTokenBuckets());
  e2e_ = AddHistogram(r, "kvfleet_router_e2e_request_latency_seconds", "From a call's arrival to its end",
                      transport::RequestBuckets());
}

void RouterMetrics::RecordRequest(const std::string& method, const std::string& code) {
  requests_->Add({{"method", method}, {"code", code}}).Increment();
}

void RouterMetrics::RecordDecision(Policy policy, const Decision& decision) {
  decisions_->Add({{"policy", std::string(PolicyName(policy))}, {"reason", std::string(ReasonName(decision.reason))}})
      .Increment();
  prefix_match_ratio_->Observe(decision.prefix_match_ratio);
}

void RouterMetrics::RecordRetry() { retries_->Increment(); }
void RouterMetrics::RecordResumption() { resumptions_->Increment(); }
void RouterMetrics::RecordCacheManagerFallback() { fallbacks_->Increment(); }
void RouterMetrics::RecordOverhead(double seconds) { overhead_->Observe(seconds); }
void RouterMetrics::RecordFirstToken(double seconds) { ttft_->Observe(seconds); }
void RouterMetrics::RecordInterToken(double seconds) { inter_token_->Observe(seconds); }

void RouterMetrics::RecordFinished(double e2e_seconds, int64_t prompt_tokens, int64_t cached_prompt_tokens,
                                   int64_t generated_tokens) {
  e2e_->Observe(e2e_seconds);
  prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
  cached_prompt_tokens_->Increment(static_cast<double>(cached_prompt_tokens));
  generated_tokens_->Increment(static_cast<double>(generated_tokens));
}

std::vector<prometheus::MetricFamily> WorkerPoolCollector::Collect() const {
  const WorkerPoolCounts c = pool_.Counts();
  transport::ScrapeFamilies out;
  out.Family("kvfleet_router_workers", "Workers the router knows, by state", prometheus::MetricType::Gauge)
      .Add(c.routable, {{"state", "routable"}})
      .Add(c.draining, {{"state", "draining"}})
      .Add(c.unreachable, {{"state", "unreachable"}});
  return std::move(out).Take();
}

}  // namespace kvfleet::router
