// Serves a service's Prometheus registry (and any extra collectables) over
// HTTP at /metrics, on its own port.
//
//   ASSIGN_OR_RETURN(auto exposer, StartMetricsExposer("0.0.0.0", 9464));
//   exposer->RegisterCollectable(registry);   // exposer->port() is the bound port
#pragma once

#include <prometheus/exposer.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kvfleet::transport {

class MetricsExposer {
 public:
  explicit MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer, int port)
      : exposer_(std::move(exposer)), port_(port) {}
  void RegisterCollectable(const std::weak_ptr<prometheus::Collectable>& c) { exposer_->RegisterCollectable(c); }
  // Waits for a scrape in progress, so what the collectable reads may be
  // destroyed afterwards.
  void RemoveCollectable(const std::weak_ptr<prometheus::Collectable>& c) { exposer_->RemoveCollectable(c); }
  int port() const { return port_; }

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
};

// Port 0 picks a free port. UNAVAILABLE naming the address when it cannot bind.
absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposer(const std::string& host, int port);

}  // namespace kvfleet::transport
