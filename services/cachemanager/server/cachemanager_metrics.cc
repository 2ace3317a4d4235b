#include "services/cachemanager/server/cachemanager_metrics.h"

#include <prometheus/metric_family.h>

namespace kvfleet::cachemanager {

CacheManagerMetrics::CacheManagerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  // From a few microseconds (the index lookup) to tens of milliseconds (a
  // lock held by a large snapshot).
  const prometheus::Histogram::BucketBoundaries buckets = {5e-6,  1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                                           5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2};
  find_overlaps_ = &prometheus::BuildHistogram()
                        .Name("kvfleet_cachemanager_find_overlaps_seconds")
                        .Help("Time to answer one FindOverlaps call, in the server")
                        .Register(*registry_)
                        .Add({}, buckets);
  rejected_ = &prometheus::BuildCounter()
                   .Name("kvfleet_cachemanager_rejected_batches_total")
                   .Help("Event batches refused (unknown worker, sequence not moving forward, malformed), by code")
                   .Register(*registry_);
}

namespace {

prometheus::ClientMetric Value(prometheus::MetricType type, double v,
                               std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = v;
  } else {
    m.gauge.value = v;
  }
  return m;
}

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type, double v) {
  return {.name = name, .help = help, .type = type, .metric = {Value(type, v)}};
}

}  // namespace

std::vector<prometheus::MetricFamily> KvMapCollector::Collect() const {
  using prometheus::MetricType;
  const KvMapSnapshot s = read_();
  std::vector<prometheus::MetricFamily> out;
  out.push_back(One("kvfleet_cachemanager_live_workers", "Registered workers within their liveness deadline",
                    MetricType::Gauge, static_cast<double>(s.workers.size())));
  prometheus::MetricFamily per_worker{.name = "kvfleet_cachemanager_indexed_blocks",
                                      .help = "KV blocks indexed for each live worker",
                                      .type = MetricType::Gauge};
  for (const WorkerView& w : s.workers) {
    per_worker.metric.push_back(Value(MetricType::Gauge, static_cast<double>(w.indexed_blocks),
                                      {{"worker_id", w.descriptor.worker_id}}));
  }
  out.push_back(std::move(per_worker));
  out.push_back(One("kvfleet_cachemanager_distinct_hashes", "Distinct block hashes in the index", MetricType::Gauge,
                    static_cast<double>(s.distinct_hashes)));
  out.push_back(One("kvfleet_cachemanager_events_ingested_total", "KV events applied to the index",
                    MetricType::Counter, static_cast<double>(s.counters.events_ingested)));
  out.push_back(One("kvfleet_cachemanager_snapshots_total", "Worker snapshots applied", MetricType::Counter,
                    static_cast<double>(s.counters.snapshots)));
  out.push_back(One("kvfleet_cachemanager_sequence_gaps_total",
                    "Event batches that skipped sequence numbers (each triggers a snapshot request)",
                    MetricType::Counter, static_cast<double>(s.counters.sequence_gaps)));
  return out;
}

}  // namespace kvfleet::cachemanager
