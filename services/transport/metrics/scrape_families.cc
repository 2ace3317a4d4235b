#include "services/transport/metrics/scrape_families.h"

#include <iterator>

namespace kvfleet::transport {

ScrapeFamilies::FamilyRef& ScrapeFamilies::FamilyRef::Add(double value,
                                                          std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (family_.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family_.metric.push_back(std::move(m));
  return *this;
}

ScrapeFamilies::FamilyRef ScrapeFamilies::Family(const char* name, const char* help, prometheus::MetricType type) {
  families_.push_back({.name = name, .help = help, .type = type});
  return FamilyRef(families_.back());
}

std::vector<prometheus::MetricFamily> ScrapeFamilies::Take() && {
  return {std::make_move_iterator(families_.begin()), std::make_move_iterator(families_.end())};
}

void ScrapeFamilies::Gauge(const char* name, const char* help, double value) {
  Family(name, help, prometheus::MetricType::Gauge).Add(value);
}

void ScrapeFamilies::Counter(const char* name, const char* help, double value) {
  Family(name, help, prometheus::MetricType::Counter).Add(value);
}

}  // namespace kvfleet::transport
