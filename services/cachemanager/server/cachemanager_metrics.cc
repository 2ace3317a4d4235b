#include "services/cachemanager/server/cachemanager_metrics.h"

#include "services/transport/metrics/scrape_families.h"

namespace kvfleet::cachemanager {

CacheManagerMetrics::CacheManagerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  // From a few microseconds (the index lookup) to tens of milliseconds (a
  // lock held by a large snapshot).
  const prometheus::Histogram::BucketBoundaries buckets = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
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
  // At 0 from start-up, so their rate() exists before the first refusal.
  for (const char* code : {"not_found", "failed_precondition", "invalid_argument"}) rejected_->Add({{"code", code}});
}

std::vector<prometheus::MetricFamily> KvMapCollector::Collect() const {
  const KvMapSnapshot s = read_();
  transport::ScrapeFamilies out;
  out.Gauge("kvfleet_cachemanager_live_workers", "Registered workers within their liveness deadline",
            static_cast<double>(s.workers.size()));
  auto per_worker = out.Family("kvfleet_cachemanager_indexed_blocks", "KV blocks indexed for each live worker",
                               prometheus::MetricType::Gauge);
  auto per_tier = out.Family("kvfleet_cachemanager_indexed_tier_blocks",
                             "KV blocks indexed for each live worker, by the tier it best holds them in",
                             prometheus::MetricType::Gauge);
  for (const WorkerView& w : s.workers) {
    per_worker.Add(static_cast<double>(w.indexed_blocks), {{"worker_id", w.descriptor.worker_id}});
    const int64_t lower = w.indexed_host_blocks + w.indexed_disk_blocks;
    per_tier.Add(static_cast<double>(w.indexed_blocks - lower),
                 {{"worker_id", w.descriptor.worker_id}, {"tier", "device"}});
    per_tier.Add(static_cast<double>(w.indexed_host_blocks), {{"worker_id", w.descriptor.worker_id}, {"tier", "host"}});
    per_tier.Add(static_cast<double>(w.indexed_disk_blocks), {{"worker_id", w.descriptor.worker_id}, {"tier", "disk"}});
  }
  out.Gauge("kvfleet_cachemanager_distinct_hashes", "Distinct block hashes in the index",
            static_cast<double>(s.distinct_hashes));
  out.Gauge("kvfleet_cachemanager_broken_chain_workers",
            "Live workers holding a block whose place in its chain is unknown: prompts they match are looked up "
            "hash by hash instead of bisected",
            static_cast<double>(s.broken_chain_workers));
  out.Counter("kvfleet_cachemanager_events_ingested_total", "KV events applied to the index",
              static_cast<double>(s.counters.events_ingested));
  out.Counter("kvfleet_cachemanager_snapshots_total", "Worker snapshots applied",
              static_cast<double>(s.counters.snapshots));
  out.Counter("kvfleet_cachemanager_sequence_gaps_total",
              "Event batches that skipped sequence numbers (each triggers a snapshot request)",
              static_cast<double>(s.counters.sequence_gaps));
  out.Counter("kvfleet_cachemanager_over_capacity_hashes_total",
              "Reported block hashes not indexed because the worker already held the blocks it registered "
              "(each such batch asks for a snapshot)",
              static_cast<double>(s.counters.over_capacity_hashes));
  return std::move(out).Take();
}

}  // namespace kvfleet::cachemanager
