// The cachemanager's Prometheus metrics (docs/metrics.md). FindOverlaps
// latency and refused batches are recorded as they happen; the state of the
// map (live workers, indexed blocks per worker, events, snapshots, gaps) is
// read from it at scrape time by KvMapCollector.
//
// Labels: worker_id on the per-worker gauge (one series per live worker, so
// bounded by the cluster's size) and a status code; never a hash or request.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "services/cachemanager/index/kv_map.h"

namespace kvfleet::cachemanager {

class CacheManagerMetrics {
 public:
  CacheManagerMetrics();
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void RecordFindOverlaps(double seconds) { find_overlaps_->Observe(seconds); }
  void RecordRejectedBatch(const std::string& code) { rejected_->Add({{"code", code}}).Increment(); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* find_overlaps_;
  prometheus::Family<prometheus::Counter>* rejected_;
};

// What a scrape reads from the map, under the service's lock.
struct KvMapSnapshot {
  std::vector<WorkerView> workers;
  KvMapCounters counters;
  int64_t distinct_hashes = 0;
  int32_t broken_chain_workers = 0;
};

class KvMapCollector : public prometheus::Collectable {
 public:
  explicit KvMapCollector(std::function<KvMapSnapshot()> read) : read_(std::move(read)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<KvMapSnapshot()> read_;
};

}  // namespace kvfleet::cachemanager
