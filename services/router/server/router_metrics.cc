#include "services/router/server/router_metrics.h"

#include <algorithm>

#include "services/transport/metrics/registry_metrics.h"
#include "services/transport/metrics/scrape_families.h"

namespace kvfleet::router {
using transport::AddCounter;
using transport::AddHistogram;

RouterMetrics::RouterMetrics(int max_tenant_labels)
    : registry_(std::make_shared<prometheus::Registry>()), max_tenant_labels_(std::max(max_tenant_labels, 0)) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("kvfleet_router_requests_total")
                   .Help("Finished calls of the public API, by method and gRPC status code")
                   .Register(r);
  http_requests_ = &prometheus::BuildCounter()
                        .Name("kvfleet_router_http_requests_total")
                        .Help("Finished requests on the OpenAI-compatible HTTP port, by endpoint and HTTP status")
                        .Register(r);
  decisions_ = &prometheus::BuildCounter()
                    .Name("kvfleet_router_routing_decisions_total")
                    .Help("Placement decisions, by model, the policy applied and the reason for the choice")
                    .Register(r);
  prefix_match_ratio_ =
      &prometheus::BuildHistogram()
           .Name("kvfleet_router_prefix_match_ratio")
           .Help("Share of the prompt's full blocks the chosen worker held (or was recently sent) at decision time")
           .Register(r);
  pull_decisions_ = &prometheus::BuildCounter()
                         .Name("kvfleet_router_kv_pull_decisions_total")
                         .Help(
                             "Decisions where a peer held more of the prompt than the chosen worker: pull (the "
                             "worker was told to copy it) or recompute (priced no faster than computing)")
                         .Register(r);
  retries_ = &prometheus::BuildCounter()
                  .Name("kvfleet_router_retries_total")
                  .Help("Requests sent to another worker after one failed before their first token")
                  .Register(r);
  resumptions_ = &prometheus::BuildCounter()
                      .Name("kvfleet_router_resumptions_total")
                      .Help("Streams resumed on another worker after theirs failed mid-generation")
                      .Register(r);
  fallbacks_ = AddCounter(r, "kvfleet_router_cachemanager_fallbacks_total",
                          "Decisions made least_loaded because the cachemanager could not be asked");
  prompt_tokens_ = &prometheus::BuildCounter()
                        .Name("kvfleet_router_prompt_tokens_total")
                        .Help("Prompt tokens of finished requests")
                        .Register(r);
  cached_prompt_tokens_ = &prometheus::BuildCounter()
                               .Name("kvfleet_router_cached_prompt_tokens_total")
                               .Help("Prompt tokens of finished requests the worker served from its prefix cache")
                               .Register(r);
  generated_tokens_ = &prometheus::BuildCounter()
                           .Name("kvfleet_router_generated_tokens_total")
                           .Help("Tokens streamed to clients")
                           .Register(r);
  overhead_ = &prometheus::BuildHistogram()
                   .Name("kvfleet_router_overhead_seconds")
                   .Help(
                       "From a call's arrival to its request leaving for a worker: tokenization, hashing, the "
                       "cachemanager lookup and the decision")
                   .Register(r);
  ttft_ = &prometheus::BuildHistogram()
               .Name("kvfleet_router_time_to_first_token_seconds")
               .Help(
                   "From a call's arrival to its first token reaching the client, by path: whole (one worker) or "
                   "split (a prefill worker's first token)")
               .Register(r);
  split_decisions_ = &prometheus::BuildCounter()
                          .Name("kvfleet_router_split_decisions_total")
                          .Help(
                              "Requests with a prefill worker live: split (prefill there, decode elsewhere) or "
                              "whole, by reason")
                          .Register(r);
  inter_token_ = &prometheus::BuildHistogram()
                      .Name("kvfleet_router_inter_token_latency_seconds")
                      .Help("Between consecutive messages of tokens sent to a client")
                      .Register(r);
  e2e_ = &prometheus::BuildHistogram()
              .Name("kvfleet_router_e2e_request_latency_seconds")
              .Help("From a call's arrival to its end")
              .Register(r);
  tenant_requests_ = &prometheus::BuildCounter()
                          .Name("kvfleet_router_tenant_requests_total")
                          .Help("Finished generating calls by tenant (bounded; later tenants are \"other\") and code")
                          .Register(r);
  tenant_tokens_ = &prometheus::BuildCounter()
                        .Name("kvfleet_router_tenant_tokens_total")
                        .Help("Prompt and generated tokens of finished calls, by tenant and kind")
                        .Register(r);
  quota_refusals_ = &prometheus::BuildCounter()
                         .Name("kvfleet_router_tenant_quota_refusals_total")
                         .Help("Calls refused RESOURCE_EXHAUSTED by a tenant quota, by tenant and quota")
                         .Register(r);
}

ModelMetrics& RouterMetrics::Model(const std::string& model_id) {
  absl::MutexLock lock(&labels_mu_);
  std::unique_ptr<ModelMetrics>& m = models_[model_id];
  if (m != nullptr) return *m;
  m = std::make_unique<ModelMetrics>();
  const prometheus::Labels model{{"model", model_id}};
  auto with = [&model](prometheus::Labels more) {
    more.insert(model.begin(), model.end());
    return more;
  };
  m->model_ = model_id;
  m->decisions_ = decisions_;
  m->split_decisions_ = split_decisions_;
  m->pulls_sent_ = &pull_decisions_->Add(with({{"decision", "pull"}}));
  m->pulls_declined_ = &pull_decisions_->Add(with({{"decision", "recompute"}}));
  m->prefix_match_ratio_ = &prefix_match_ratio_->Add(
      model, prometheus::Histogram::BucketBoundaries{0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0});
  m->retries_ = &retries_->Add(model);
  m->resumptions_ = &resumptions_->Add(model);
  m->prompt_tokens_ = &prompt_tokens_->Add(model);
  m->cached_prompt_tokens_ = &cached_prompt_tokens_->Add(model);
  m->generated_tokens_ = &generated_tokens_->Add(model);
  m->overhead_ = &overhead_->Add(model, transport::OverheadBuckets());
  m->ttft_ = &ttft_->Add(with({{"path", "whole"}}), transport::TtftBuckets());
  m->ttft_split_ = &ttft_->Add(with({{"path", "split"}}), transport::TtftBuckets());
  m->inter_token_ = &inter_token_->Add(model, transport::InterTokenBuckets());
  m->e2e_ = &e2e_->Add(model, transport::RequestBuckets());
  // At 0 from the model's first request, so their rate() exists before the first split.
  for (SplitReason reason : {SplitReason::kLongUncached, SplitReason::kShort, SplitReason::kNoPrefillWorker,
                             SplitReason::kPullPricedOut, SplitReason::kDisabled}) {
    split_decisions_->Add(with({{"decision", reason == SplitReason::kLongUncached ? "split" : "whole"},
                                {"reason", std::string(SplitReasonName(reason))}}));
  }
  return *m;
}

std::string RouterMetrics::TenantLabel(const std::string& tenant) {
  if (tenant.empty()) return "none";
  absl::MutexLock lock(&labels_mu_);
  if (tenant_labels_.contains(tenant)) return tenant;
  if (tenant_labels_.size() >= max_tenant_labels_) return "other";
  tenant_labels_.insert(tenant);
  return tenant;
}

void RouterMetrics::RecordTenantRequest(const std::string& tenant, const std::string& code) {
  tenant_requests_->Add({{"tenant", TenantLabel(tenant)}, {"code", code}}).Increment();
}

void RouterMetrics::RecordTenantTokens(const std::string& tenant, int64_t prompt_tokens, int64_t generated_tokens) {
  const std::string label = TenantLabel(tenant);
  tenant_tokens_->Add({{"tenant", label}, {"kind", "prompt"}}).Increment(static_cast<double>(prompt_tokens));
  tenant_tokens_->Add({{"tenant", label}, {"kind", "generated"}}).Increment(static_cast<double>(generated_tokens));
}

void RouterMetrics::RecordQuotaRefusal(const std::string& tenant, const std::string& quota) {
  quota_refusals_->Add({{"tenant", TenantLabel(tenant)}, {"quota", quota}}).Increment();
}

void RouterMetrics::RecordRequest(const std::string& method, const std::string& code) {
  requests_->Add({{"method", method}, {"code", code}}).Increment();
}

void RouterMetrics::RecordHttpRequest(const std::string& endpoint, int status) {
  http_requests_->Add({{"endpoint", endpoint}, {"status", std::to_string(status)}}).Increment();
}

void RouterMetrics::RecordCacheManagerFallback() { fallbacks_->Increment(); }

void ModelMetrics::RecordDecision(Policy policy, const Decision& decision) {
  decisions_
      ->Add({{"model", model_},
             {"policy", std::string(PolicyName(policy))},
             {"reason", std::string(ReasonName(decision.reason))}})
      .Increment();
  prefix_match_ratio_->Observe(decision.prefix_match_ratio);
  if (decision.peer_pull.has_value()) {
    pulls_sent_->Increment();
  } else if (decision.pull_declined) {
    pulls_declined_->Increment();
  }
}

void ModelMetrics::RecordSplit(const SplitVerdict& verdict) {
  split_decisions_
      ->Add({{"model", model_},
             {"decision", verdict.split ? "split" : "whole"},
             {"reason", std::string(SplitReasonName(verdict.reason))}})
      .Increment();
}

void ModelMetrics::RecordRetry() { retries_->Increment(); }
void ModelMetrics::RecordResumption() { resumptions_->Increment(); }
void ModelMetrics::RecordOverhead(double seconds) { overhead_->Observe(seconds); }
void ModelMetrics::RecordFirstToken(double seconds, bool split) { (split ? ttft_split_ : ttft_)->Observe(seconds); }
void ModelMetrics::RecordInterToken(double seconds) { inter_token_->Observe(seconds); }

void ModelMetrics::RecordFinished(double e2e_seconds, int64_t prompt_tokens, int64_t cached_prompt_tokens,
                                  int64_t generated_tokens) {
  e2e_->Observe(e2e_seconds);
  prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
  cached_prompt_tokens_->Increment(static_cast<double>(cached_prompt_tokens));
  generated_tokens_->Increment(static_cast<double>(generated_tokens));
}

std::vector<prometheus::MetricFamily> WorkerPoolCollector::Collect() const {
  transport::ScrapeFamilies out;
  auto family = out.Family("kvfleet_router_workers",
                           "Workers the router knows, by model and state (model \"\": not yet described by GetInfo)",
                           prometheus::MetricType::Gauge);
  for (const auto& [model, c] : pool_.CountsByModel()) {
    family.Add(c.routable, {{"model", model}, {"state", "routable"}})
        .Add(c.draining, {{"model", model}, {"state", "draining"}})
        .Add(c.unreachable, {{"model", model}, {"state", "unreachable"}});
  }
  return std::move(out).Take();
}

std::vector<prometheus::MetricFamily> PlacementCollector::Collect() const {
  transport::ScrapeFamilies out;
  out.Family("kvfleet_router_placement_in_flight",
             "Placement decisions counted as load their workers have not reported yet", prometheus::MetricType::Gauge)
      .Add(static_cast<double>(placement_.in_flight()), {});
  out.Family("kvfleet_router_placement_remembered_blocks",
             "(block, worker) pairs the router remembers sending, ahead of the workers' KV events",
             prometheus::MetricType::Gauge)
      .Add(static_cast<double>(placement_.remembered_blocks()), {});
  return std::move(out).Take();
}

}  // namespace kvfleet::router
