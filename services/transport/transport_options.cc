#include "services/transport/transport_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

std::set<std::string> WithTransportSwitches(std::set<std::string> own) {
  own.insert("no-reflection");
  return own;
}

std::set<std::string> WithTransportFlags(std::set<std::string> own) {
  own.insert({"listen", "metrics-host", "metrics-port", "health-port", "log-level", "tls-cert", "tls-key", "tls-ca",
              "tls-client-ca", "tls-allowed-peers"});
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
  if (f.GetSwitch("no-reflection")) o.reflection = false;
  o.tls = {.cert = f.GetString("tls-cert", o.tls.cert),
           .key = f.GetString("tls-key", o.tls.key),
           .ca = f.GetString("tls-ca", o.tls.ca),
           .client_ca = f.GetString("tls-client-ca", o.tls.client_ca)};
  RETURN_IF_ERROR(CheckTlsFiles(o.tls));
  for (absl::string_view name : absl::StrSplit(f.GetString("tls-allowed-peers", ""), ',', absl::SkipWhitespace())) {
    o.tls_allowed_peers.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (!o.tls_allowed_peers.empty() && o.tls.client_ca.empty()) {
    return absl::InvalidArgumentError("--tls-allowed-peers names client certificates: it needs --tls-client-ca");
  }
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
      "  --log-level LEVEL            trace, debug, info, warn, error (default ", d.log_level, "); logs go to stderr\n",
      "  --tls-cert PEM --tls-key PEM TLS on the gRPC port with this certificate chain and key (default: plaintext);\n",
      "                               also this service's client certificate towards the peers it calls\n",
      "  --tls-ca PEM                 verify the peers this service calls against these CA certificates\n",
      "  --tls-client-ca PEM          require clients to present a certificate these CAs signed (mutual TLS)\n",
      "  --tls-allowed-peers N,N      and to name one of these (DNS name or common name); others: PERMISSION_DENIED\n",
      "                               The files are re-read when they change: rotating them needs no restart.\n",
      "  --no-reflection              do not offer gRPC server reflection (method discovery) on the gRPC port\n");
}

}  // namespace kvfleet::transport
