#include "services/transport/metrics/metrics_exposer.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace kvfleet::transport {

absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposer(const std::string& host, int port) {
  const std::string address = absl::StrCat(host, ":", port);
  std::unique_ptr<prometheus::Exposer> exposer;
  // prometheus-cpp reports a failed bind by throwing; no exception leaves here.
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what(), "; pick another --metrics-port"));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics server on ", address, " bound no port"));
  return std::make_unique<MetricsExposer>(std::move(exposer), ports.front());
}

}  // namespace kvfleet::transport
