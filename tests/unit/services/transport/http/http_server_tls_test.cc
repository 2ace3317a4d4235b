// The HTTP server over TLS with certificates from a throwaway CA and an
// OpenSSL client: a client that trusts the CA is served, one that does not
// fails its handshake, a rotated certificate is served without a restart,
// and with a client CA the client's certificate must name an allowed peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "gtest/gtest.h"
#include "services/transport/http/http_server.h"
#include "services/transport/tls/tls_peer_names.h"
#include "tests/testing/temp_dir.h"
#include "tools/cluster/local_pki.h"

namespace kvfleet::transport {
namespace {

using cluster::CertificateFiles;
using cluster::LocalCa;

struct Outcome {
  bool handshake = false;
  std::string server_name;  // the common name of the certificate the server presented
  std::string response;     // what came back after the request
};

// One HTTPS GET over a fresh connection, trusting `ca`, presenting `client` when given.
Outcome Get(int port, const std::string& ca, const CertificateFiles* client = nullptr) {
  Outcome out;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  if (client != nullptr) {
    SSL_CTX_use_certificate_chain_file(ctx, client->cert.c_str());
    SSL_CTX_use_PrivateKey_file(ctx, client->key.c_str(), SSL_FILETYPE_PEM);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SSL* ssl = nullptr;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, "127.0.0.1");
    out.handshake = SSL_connect(ssl) == 1;
  }
  if (out.handshake) {
    if (X509* cert = SSL_get1_peer_certificate(ssl)) {
      char name[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof(name));
      out.server_name = name;
      X509_free(cert);
    }
    const std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buffer[4096];
    for (int n; (n = SSL_read(ssl, buffer, sizeof(buffer))) > 0;) out.response.append(buffer, static_cast<size_t>(n));
  }
  if (ssl != nullptr) SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return out;
}

class HttpServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LocalCa> ca = LocalCa::Create(dir_.Path("ca"));
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = std::make_unique<LocalCa>(*std::move(ca));
    absl::StatusOr<LocalCa> other = LocalCa::Create(dir_.Path("other-ca"), "another CA");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_ = other->files().cert;
  }

  CertificateFiles Issue(const std::string& prefix, const std::string& name) {
    absl::StatusOr<CertificateFiles> files = ca_->Issue(dir_.Path(prefix), name);
    EXPECT_TRUE(files.ok()) << files.status();
    return files.ok() ? *files : CertificateFiles{};
  }

  std::unique_ptr<HttpServer> Start(HttpServerOptions options) {
    options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
        std::move(options), [](const HttpRequest&, HttpResponder& out) { out.Respond(200, "text/plain", "secret"); });
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  testing::TempDir dir_;
  std::unique_ptr<LocalCa> ca_;
  std::string other_ca_;
};

TEST_F(HttpServerTlsTest, ServesClientsThatTrustItsCaAndPicksUpARotatedCertificate) {
  const CertificateFiles first = Issue("server", "first");
  auto server =
      Start({.tls = {.cert = first.cert, .key = first.key}, .tls_reload_interval = std::chrono::milliseconds(50)});
  ASSERT_NE(server, nullptr);
  Outcome trusted = Get(server->port(), ca_->files().cert);
  EXPECT_TRUE(trusted.handshake);
  EXPECT_EQ(trusted.server_name, "first");
  EXPECT_NE(trusted.response.find("200 OK"), std::string::npos) << trusted.response;
  EXPECT_NE(trusted.response.find("secret"), std::string::npos);

  Outcome untrusted = Get(server->port(), other_ca_);
  EXPECT_FALSE(untrusted.handshake);
  EXPECT_TRUE(untrusted.response.empty());

  // Rotation: new files at the same paths, served to the next connections.
  const CertificateFiles second = Issue("next", "second");
  std::filesystem::copy_file(second.cert, first.cert, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(second.key, first.key, std::filesystem::copy_options::overwrite_existing);
  std::string name;
  for (int i = 0; i < 100 && name != "second"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    name = Get(server->port(), ca_->files().cert).server_name;
  }
  EXPECT_EQ(name, "second");
}

TEST_F(HttpServerTlsTest, WithAClientCaTheClientsCertificateMustNameAnAllowedPeer) {
  const CertificateFiles server_files = Issue("server", "router");
  const CertificateFiles allowed = Issue("client-a", "app");
  const CertificateFiles other = Issue("client-b", "worker");
  auto server = Start({.tls = {.cert = server_files.cert, .key = server_files.key, .client_ca = ca_->files().cert},
                       .allowed_peers = {"app"}});
  ASSERT_NE(server, nullptr);
  EXPECT_NE(Get(server->port(), ca_->files().cert, &allowed).response.find("200 OK"), std::string::npos);
  const Outcome refused = Get(server->port(), ca_->files().cert, &other);
  EXPECT_NE(refused.response.find("403"), std::string::npos) << refused.response;
  EXPECT_EQ(refused.response.find("secret"), std::string::npos);
  // No certificate at all: TLS 1.3 finishes the client's handshake first,
  // then the server refuses; either way nothing is served.
  EXPECT_EQ(Get(server->port(), ca_->files().cert).response.find("secret"), std::string::npos);
}

// The names the allowed-peers rule reads, and that it matches them exactly.
TEST_F(HttpServerTlsTest, ACertificatesNamesAreItsSansAndCommonNameMatchedExactly) {
  const CertificateFiles files = Issue("client", "app");
  std::FILE* f = std::fopen(files.cert.c_str(), "r");
  ASSERT_NE(f, nullptr);
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(CertificateNames(cert), (std::vector<std::string>{"app", "localhost", "127.0.0.1", "app"}));
  EXPECT_TRUE(CertificateNamesOneOf(cert, {"worker", "app"}));
  EXPECT_TRUE(CertificateNamesOneOf(cert, {"127.0.0.1"}));
  EXPECT_FALSE(CertificateNamesOneOf(cert, {"ap", "*.app", "APP", "worker"}));
  X509_free(cert);
}

}  // namespace
}  // namespace kvfleet::transport
