#include "services/transport/http/http_tls_context.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "services/transport/tls/tls_peer_names.h"

namespace kvfleet::transport {
namespace {

namespace ssl = boost::asio::ssl;

std::optional<std::filesystem::file_time_type> ModifiedAt(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(path, ec);
  if (ec) return std::nullopt;
  return t;
}

}  // namespace

absl::StatusOr<HttpTlsContext> HttpTlsContext::Create(TlsFiles files, std::vector<std::string> allowed_peers,
                                                      std::chrono::milliseconds reload_interval) {
  if (absl::Status s = CheckTlsFiles(files); !s.ok()) return s;
  HttpTlsContext tls(std::move(files), std::move(allowed_peers), reload_interval);
  absl::StatusOr<std::shared_ptr<ssl::context>> context = tls.Build();
  if (!context.ok()) return context.status();
  tls.context_ = *std::move(context);
  tls.checked_at_ = std::chrono::steady_clock::now();
  tls.times_ = tls.Times();
  return tls;
}

absl::StatusOr<std::shared_ptr<ssl::context>> HttpTlsContext::Build() const {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                           ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                       ec);
  if (!ec) context->use_certificate_chain_file(files_.cert, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", files_.cert, ": ", ec.message()));
  context->use_private_key_file(files_.key, ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-key ", files_.key, ": ", ec.message()));
  if (!files_.client_ca.empty()) {
    context->load_verify_file(files_.client_ca, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-client-ca ", files_.client_ca, ": ", ec.message()));
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

HttpTlsContext::FileTimes HttpTlsContext::Times() const {
  return {ModifiedAt(files_.cert), ModifiedAt(files_.key), ModifiedAt(files_.client_ca)};
}

std::shared_ptr<ssl::context> HttpTlsContext::Current() {
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_at_ < reload_interval_) return context_;
  checked_at_ = now;
  FileTimes times = Times();
  if (times == times_) return context_;
  if (absl::Status s = CheckTlsFiles(files_); !s.ok()) {
    KVFLEET_LOG_WARN("HTTP: the TLS files changed but cannot be used ({}); keeping the previous ones",
                     std::string(s.message()));
    return context_;
  }
  absl::StatusOr<std::shared_ptr<ssl::context>> context = Build();
  if (!context.ok()) {
    KVFLEET_LOG_WARN("HTTP: cannot reload the TLS files ({}); keeping the previous ones",
                     std::string(context.status().message()));
    return context_;
  }
  KVFLEET_LOG_INFO("HTTP: reloaded the TLS files ({})", files_.cert);
  times_ = std::move(times);
  context_ = *std::move(context);
  return context_;
}

bool HttpTlsContext::PeerAllowed(SSL* ssl_handle) const {
  if (allowed_peers_.empty()) return true;
  X509* cert = SSL_get1_peer_certificate(ssl_handle);
  const bool allowed = cert != nullptr && CertificateNamesOneOf(cert, allowed_peers_);
  if (cert != nullptr) X509_free(cert);
  if (!allowed) KVFLEET_LOG_WARN("HTTP: refused a TLS client whose certificate names none of --tls-allowed-peers");
  return allowed;
}

}  // namespace kvfleet::transport
