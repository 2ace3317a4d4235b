#include "services/transport/transport_options.h"

#include <fstream>
#include <iterator>
#include <limits>

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

absl::StatusOr<int32_t> AtLeast(const flags::Flags& f, const std::string& name, int32_t fallback, int64_t lowest) {
  ASSIGN_OR_RETURN(int64_t value, f.GetInt(name, fallback));
  if (value < lowest || value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " ", value, " must be in [", lowest, ", ",
                                                   std::numeric_limits<int32_t>::max(), "]"));
  }
  return static_cast<int32_t>(value);
}

}  // namespace

absl::StatusOr<std::string> ReadInternalToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--internal-token-file ", path, " cannot be read"));
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.size() < 16 || token.size() > 512 || token.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--internal-token-file ", path,
                                                   " must hold one token of 16 to 512 characters without spaces "
                                                   "(e.g. `openssl rand -hex 32`)"));
  }
  return token;
}

std::set<std::string> WithTransportSwitches(std::set<std::string> own) {
  own.insert("no-reflection");
  return own;
}

std::set<std::string> WithTransportFlags(std::set<std::string> own) {
  own.insert({"listen", "metrics-host", "metrics-port", "health-port", "log-level", "tls-cert", "tls-key", "tls-ca",
              "tls-client-ca", "tls-allowed-peers", "max-message-bytes", "max-metadata-bytes",
              "max-concurrent-streams", "internal-token-file"});
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
  ASSIGN_OR_RETURN(o.max_message_bytes, AtLeast(f, "max-message-bytes", o.max_message_bytes, 1024));
  ASSIGN_OR_RETURN(o.max_metadata_bytes, AtLeast(f, "max-metadata-bytes", o.max_metadata_bytes, 1024));
  ASSIGN_OR_RETURN(o.max_concurrent_streams, AtLeast(f, "max-concurrent-streams", o.max_concurrent_streams, 1));
  if (f.Has("internal-token-file")) {
    if (o.tls.serves_tls() || !o.tls.ca.empty()) {
      return absl::InvalidArgumentError(
          "--internal-token-file is for plaintext loopback clusters; with TLS, mutual TLS and --tls-allowed-peers "
          "authorise peers instead");
    }
    ASSIGN_OR_RETURN(o.internal_token, ReadInternalToken(f.GetString("internal-token-file", "")));
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
      "  --no-reflection              do not offer gRPC server reflection (method discovery) on the gRPC port\n",
      "  --max-message-bytes N        largest message accepted (default ", d.max_message_bytes, ")\n",
      "  --max-metadata-bytes N       largest request metadata (headers) accepted (default ", d.max_metadata_bytes,
      ")\n",
      "  --max-concurrent-streams N   calls in flight on one client connection; more wait (default ",
      d.max_concurrent_streams, ")\n",
      "  --internal-token-file FILE   without TLS: a shared secret for the cluster's internal calls; the worker and\n",
      "                               cachemanager require it from their callers (except health), the router and\n",
      "                               workers send it. Loopback peers only; across hosts use mutual TLS\n");
}

}  // namespace kvfleet::transport
