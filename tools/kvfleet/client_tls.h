// The credential flags of the CLI's commands that call a service directly
// (`kvfleet load`, `kvfleet workers`): --tls-ca to verify it, and
// --tls-cert/--tls-key to present where it requires mutual TLS (workers and
// the cachemanager do in a cluster started with TLS); or, without TLS, the
// cluster's --internal-token-file.
#pragma once

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::tools {

inline constexpr char kClientTlsUsage[] =
    "  --tls-ca PEM          call over TLS, the service's certificate checked against this CA\n"
    "  --tls-cert PEM --tls-key PEM  the client certificate to present (mutual TLS)\n"
    "  --tls-name NAME       the name the service's certificate must carry (default: the address's host)\n"
    "  --internal-token-file FILE  without TLS: the cluster's internal token (kvfleet up --internal-token)\n";

// `own` plus --tls-ca, --tls-cert, --tls-key, --tls-name, --internal-token-file.
std::set<std::string> WithClientTlsFlags(std::set<std::string> own);

// The channel options those flags give; the files checked as a service
// checks its own (CheckTlsFiles), so a bad one is named before any call.
absl::StatusOr<transport::ClientChannelOptions> ClientTlsFromFlags(const flags::Flags& flags);

}  // namespace kvfleet::tools
