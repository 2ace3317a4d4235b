// The flags every kvfleet service shares, parsed in one place: where the
// gRPC server listens, the metrics and health ports, the log level and the
// TLS files (checked here, so a bad one stops the service at start), the
// internal token and the transport's size limits. Each
// service keeps its own flags and embeds these.
//
//   ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, WithTransportFlags({"model"}), {}));
//   ASSIGN_OR_RETURN(o.transport, ParseTransportOptions(f, {.listen = "127.0.0.1:50051", .metrics_port = 9464}));
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "services/transport/tls/tls_files.h"

namespace kvfleet::transport {

struct TransportOptions {
  std::string listen;                    // the gRPC server's host:port; port 0 picks a free one
  std::string metrics_host = "0.0.0.0";  // the metrics and health ports bind here
  int metrics_port = 0;                  // 0 picks a free one
  int health_port = -1;                  // plaintext grpc.health.v1 alone; -1 none, 0 a free one
  std::string log_level = "info";
  TlsFiles tls;  // --tls-cert, --tls-key, --tls-ca, --tls-client-ca
  std::vector<std::string> tls_allowed_peers;  // --tls-allowed-peers: client certificate names allowed
  bool reflection = true;                       // --no-reflection turns server reflection off on the gRPC port
  // Limits on what one client may send (docs/security.md, Limits and quotas). Larger
  // messages and metadata get RESOURCE_EXHAUSTED from gRPC itself; streams
  // beyond the limit on one connection wait for one to finish (HTTP/2).
  int32_t max_message_bytes = 1 << 20;
  int32_t max_metadata_bytes = 16 << 10;
  int32_t max_concurrent_streams = 1024;
  // --internal-token-file: with TLS off, the shared secret every call to an
  // internal service (worker, cachemanager) carries and the service checks;
  // loopback peers only. Empty: none.
  std::string internal_token;
};

// `own` plus the names ParseTransportOptions reads, for Flags::Parse: its
// valued flags, and its switches.
std::set<std::string> WithTransportFlags(std::set<std::string> own);
std::set<std::string> WithTransportSwitches(std::set<std::string> own);

// Reads the shared flags from `f`; `defaults` stands for the absent ones.
// INVALID_ARGUMENT naming the flag for a port out of range or a TLS file
// that cannot be used (CheckTlsFiles).
absl::StatusOr<TransportOptions> ParseTransportOptions(const flags::Flags& f, const TransportOptions& defaults);

// The token in an --internal-token-file: one word of 16 to 512 characters;
// INVALID_ARGUMENT naming the file otherwise. Also used by the CLI.
absl::StatusOr<std::string> ReadInternalToken(const std::string& path);

// The help lines for the shared flags, with this service's defaults and
// the name its readiness is also reported under (e.g. kvfleet.v1.Worker).
std::string TransportUsage(const TransportOptions& defaults, const std::string& readiness_name);

}  // namespace kvfleet::transport
