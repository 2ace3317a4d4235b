#include "tools/kvfleet/client_tls.h"

#include "common/status_macros.h"

namespace kvfleet::tools {

std::set<std::string> WithClientTlsFlags(std::set<std::string> own) {
  own.insert({"tls-ca", "tls-cert", "tls-key", "tls-name", "internal-token-file"});
  return own;
}

absl::StatusOr<transport::ClientChannelOptions> ClientTlsFromFlags(const flags::Flags& flags) {
  transport::ClientChannelOptions options{.tls = {.cert = flags.GetString("tls-cert", ""),
                                                  .key = flags.GetString("tls-key", ""),
                                                  .ca = flags.GetString("tls-ca", "")},
                                          .server_name = flags.GetString("tls-name", "")};
  if (!options.tls.cert.empty() && options.tls.ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert presents a client certificate over TLS: give --tls-ca too");
  }
  RETURN_IF_ERROR(transport::CheckTlsFiles(options.tls));
  if (flags.Has("internal-token-file")) {
    ASSIGN_OR_RETURN(options.internal_token, transport::ReadInternalToken(flags.GetString("internal-token-file", "")));
  }
  return options;
}

}  // namespace kvfleet::tools
