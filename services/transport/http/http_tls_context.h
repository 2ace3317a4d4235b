// The HTTP server's TLS context: built from the certificate, key and
// optional client CA files, and rebuilt for new connections when those
// files change (a certificate rotation needs no restart, as on gRPC); a
// change that cannot be used keeps the previous context, with a warning.
// Also the --tls-allowed-peers check on a handshaken connection.
//
// Thread-safety: Current() is called from the server's one I/O thread.
//
//   ASSIGN_OR_RETURN(HttpTlsContext tls, HttpTlsContext::Create(files, peers, interval));
//   auto stream = ssl_stream(socket, *tls.Current());
//   if (!tls.PeerAllowed(stream.native_handle())) ...
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/transport/tls/tls_files.h"

namespace kvfleet::transport {

class HttpTlsContext {
 public:
  // INVALID_ARGUMENT naming the flag whose file cannot be used.
  static absl::StatusOr<HttpTlsContext> Create(TlsFiles files, std::vector<std::string> allowed_peers,
                                               std::chrono::milliseconds reload_interval);

  // The context for a new connection, reloaded first if the files changed
  // (checked at most once per reload interval).
  std::shared_ptr<boost::asio::ssl::context> Current();
  // Whether the client's certificate names one of the allowed peers (any
  // client when none are set).
  bool PeerAllowed(SSL* ssl_handle) const;

 private:
  using FileTimes = std::vector<std::optional<std::filesystem::file_time_type>>;

  HttpTlsContext(TlsFiles files, std::vector<std::string> allowed_peers, std::chrono::milliseconds reload_interval)
      : files_(std::move(files)), allowed_peers_(std::move(allowed_peers)), reload_interval_(reload_interval) {}
  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> Build() const;
  FileTimes Times() const;

  TlsFiles files_;
  std::vector<std::string> allowed_peers_;
  std::chrono::milliseconds reload_interval_;
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::chrono::steady_clock::time_point checked_at_;
  FileTimes times_;
};

}  // namespace kvfleet::transport
