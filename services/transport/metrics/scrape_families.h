// Builds the metric families a prometheus::Collectable returns at scrape
// time, for state a service reads on demand (engine stats, the KV map)
// instead of mirroring it into registry metrics between scrapes.
//
//   ScrapeFamilies out;
//   out.Gauge("kvfleet_worker_requests_running", "Requests in the running batch", stats.running);
//   out.Family("kvfleet_worker_kv_blocks", "KV blocks by state", MetricType::Gauge).Add(used, {{"state", "used"}});
//   return std::move(out).Take();
#pragma once

#include <prometheus/metric_family.h>

#include <deque>
#include <string>
#include <vector>

namespace kvfleet::transport {

class ScrapeFamilies {
 public:
  class FamilyRef {
   public:
    explicit FamilyRef(prometheus::MetricFamily& f) : family_(f) {}
    // One sample; labels must be of low cardinality.
    FamilyRef& Add(double value, std::vector<prometheus::ClientMetric::Label> labels = {});

   private:
    prometheus::MetricFamily& family_;
  };

  FamilyRef Family(const char* name, const char* help, prometheus::MetricType type);
  void Gauge(const char* name, const char* help, double value);
  void Counter(const char* name, const char* help, double value);
  std::vector<prometheus::MetricFamily> Take() &&;

 private:
  std::deque<prometheus::MetricFamily> families_;  // FamilyRefs stay valid as families are added
};

}  // namespace kvfleet::transport
