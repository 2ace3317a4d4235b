#include "services/transport/transport_options.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::transport {
namespace {

absl::StatusOr<int> Port(const flags::Flags& f, const std::string& name, int fallback, int lowest) {
  ASSIGN_OR_RETURN(int64_t port, f.GetInt(name, fallback));
  if (port < lowest || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " ", port, " is not a port (0 picks a free one)"));
  }
  return static_cast<int>(port);
}

}  // namespace

std::set<std::string> WithTransportFlags(std::set<std::string> own) {
  own.insert({"listen", "metrics-host", "metrics-port", "health-port", "log-level"});
  return own;
}

absl::StatusOr<TransportOptions> ParseTransportOptions(const flags::Flags& f, const TransportOptions& defaults) {
  TransportOptions o = defaults;
  o.listen = f.GetString("listen", o.listen);
  o.metrics_host = f.GetString("metrics-host", o.metrics_host);
  ASSIGN_OR_RETURN(o.metrics_port, Port(f, "metrics-port", o.metrics_port, 0));
  if (f.Has("health-port")) {
    ASSIGN_OR_RETURN(o.health_port, Port(f, "health-port", 0, 0));
  }
  o.log_level = f.GetString("log-level", o.log_level);
  return o;
}

std::string TransportUsage(const TransportOptions& d, const std::string& readiness_name) {
  return absl::StrCat(
      "  --listen HOST:PORT           gRPC address (default ", d.listen, "; port 0 picks a free one)\n",
      "  --metrics-port N             Prometheus /metrics port (default ", d.metrics_port, "; 0 picks a free one)\n",
      "  --metrics-host HOST          where the metrics and health ports bind (default ", d.metrics_host, ")\n",
      "  --health-port N              also serve grpc.health.v1, and nothing else, in plaintext on this port, for\n",
      "                               probes that cannot speak TLS (Kubernetes): readiness is \"\" and ", readiness_name,
      ",\n",
      "                               liveness is \"liveness\" (docs/api.md). Default: none; 0 picks a free one\n",
      "  --log-level LEVEL            trace, debug, info, warn, error (default ", d.log_level, "); logs go to stderr\n");
}

}  // namespace kvfleet::transport
