// TLS and mutual TLS on a service's gRPC port, with a real cachemanager
// process and certificates from a throwaway CA (tools/cluster/local_pki.h):
// the handshake succeeds with the right certificates and fails with a wrong
// CA or a missing client certificate; a bad file stops the service at start
// naming it; the health port stays plaintext; a rotated certificate is
// picked up without a restart.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>

#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"
#include "tools/cluster/local_pki.h"

namespace kvfleet::testing {
namespace {

using cluster::CertificateFiles;
using cluster::LocalCa;
using transport::ClientChannelOptions;

// A certificate signed by `ca` that expired yesterday, for `name` (DNS SAN
// and CN), with the OpenSSL API: the openssl command cannot back-date one.
CertificateFiles IssueExpired(const CertificateFiles& ca, const std::string& prefix, const std::string& name) {
  std::FILE* f = std::fopen(ca.cert.c_str(), "r");
  X509* ca_cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  f = std::fopen(ca.key.c_str(), "r");
  EVP_PKEY* ca_key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert), -2 * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert), -86400);
  X509_set_pubkey(cert, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, X509_get_subject_name(ca_cert));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert, cert, nullptr, nullptr, 0);
  const std::string san = "DNS:" + name + ",DNS:localhost,IP:127.0.0.1";
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str());
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  X509_sign(cert, ca_key, EVP_sha256());
  CertificateFiles out{.cert = prefix + ".pem", .key = prefix + ".key"};
  f = std::fopen(out.cert.c_str(), "w");
  PEM_write_X509(f, cert);
  std::fclose(f);
  f = std::fopen(out.key.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(cert);
  X509_free(ca_cert);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
  return out;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = LocalCa::Create(dir_.Path("ca"));
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = std::make_unique<LocalCa>(*ca);
    auto other = LocalCa::Create(dir_.Path("other-ca"), "another CA");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_ = std::make_unique<LocalCa>(*other);
    auto server = ca_->Issue(dir_.Path("server"), "cachemanager");
    auto client = ca_->Issue(dir_.Path("client"), "router");
    auto stranger = other_ca_->Issue(dir_.Path("stranger"), "router");
    auto worker = ca_->Issue(dir_.Path("worker"), "worker");
    ASSERT_TRUE(server.ok() && client.ok() && stranger.ok() && worker.ok());
    server_ = *server, client_ = *client, stranger_ = *stranger, worker_ = *worker;
  }

  absl::StatusOr<StartedService> Start(const std::vector<std::string>& tls_args, const std::string& log = "cm.log") {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", "0"};
    args.insert(args.end(), tls_args.begin(), tls_args.end());
    return StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY, args, dir_.Path(log),
                               absl::Seconds(30));
  }

  // A ListWorkers call over a channel with these options: its status code.
  static grpc::StatusCode Call(const std::string& address, const ClientChannelOptions& options) {
    ClientChannelOptions o = options;
    o.own_connection = true;
    auto stub = v1::CacheManager::NewStub(transport::CreateClientChannel(address, o));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListWorkersResponse response;
    return stub->ListWorkers(&context, v1::ListWorkersRequest(), &response).error_code();
  }

  TempDir dir_;
  std::unique_ptr<LocalCa> ca_, other_ca_;
  CertificateFiles server_, client_, stranger_, worker_;
};

TEST_F(TlsTest, ServerTlsAcceptsClientsThatTrustItsCaOnly) {
  absl::StatusOr<StartedService> cm = Start({"--tls-cert", server_.cert, "--tls-key", server_.key});
  ASSERT_TRUE(cm.ok()) << cm.status();
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = ca_->files().cert}}), grpc::StatusCode::OK);
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = other_ca_->files().cert}}), grpc::StatusCode::UNAVAILABLE)
      << "a server whose certificate does not chain to the client's CA";
  EXPECT_EQ(Call(cm->address, {}), grpc::StatusCode::UNAVAILABLE) << "plaintext to a TLS port";
  EXPECT_EQ(HealthServing(cm->health_address, "").value_or(false), true) << "the health port stays plaintext";
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  absl::StatusOr<StartedService> cm = Start(
      {"--tls-cert", server_.cert, "--tls-key", server_.key, "--tls-client-ca", ca_->files().cert});
  ASSERT_TRUE(cm.ok()) << cm.status();
  const std::string ca = ca_->files().cert;
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = client_.cert, .key = client_.key, .ca = ca}}), grpc::StatusCode::OK);
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = ca}}), grpc::StatusCode::UNAVAILABLE) << "no client certificate";
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = stranger_.cert, .key = stranger_.key, .ca = ca}}),
            grpc::StatusCode::UNAVAILABLE)
      << "a client certificate from another CA";
}

TEST_F(TlsTest, ExpiredCertificatesAreRefusedOnBothSides) {
  const CertificateFiles expired = IssueExpired(ca_->files(), dir_.Path("expired"), "router");
  absl::StatusOr<StartedService> refused = Start({"--tls-cert", expired.cert, "--tls-key", expired.key}, "exp.log");
  ASSERT_FALSE(refused.ok()) << "a service whose own certificate has expired";
  EXPECT_NE(std::string(refused.status().message()).find("has expired"), std::string::npos) << refused.status();

  absl::StatusOr<StartedService> cm = Start(
      {"--tls-cert", server_.cert, "--tls-key", server_.key, "--tls-client-ca", ca_->files().cert});
  ASSERT_TRUE(cm.ok()) << cm.status();
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = expired.cert, .key = expired.key, .ca = ca_->files().cert}}),
            grpc::StatusCode::UNAVAILABLE)
      << "a client certificate that has expired";
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = client_.cert, .key = client_.key, .ca = ca_->files().cert}}),
            grpc::StatusCode::OK);
}

// A valid chain is not enough: the certificate must name a role allowed here
// (routers may call workers; workers may not call each other).
TEST_F(TlsTest, AllowedPeersAreAuthorisedByTheNameTheirCertificateCarries) {
  absl::StatusOr<StartedService> cm =
      Start({"--tls-cert", server_.cert, "--tls-key", server_.key, "--tls-client-ca", ca_->files().cert,
             "--tls-allowed-peers", "router"});
  ASSERT_TRUE(cm.ok()) << cm.status();
  const std::string ca = ca_->files().cert;
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = client_.cert, .key = client_.key, .ca = ca}}), grpc::StatusCode::OK);
  EXPECT_EQ(Call(cm->address, {.tls = {.cert = worker_.cert, .key = worker_.key, .ca = ca}}),
            grpc::StatusCode::PERMISSION_DENIED)
      << "signed by the same CA, but named worker";
}

// Workers are dialled by pod IP; the router checks the name their
// certificate must carry instead (--worker-tls-name).
TEST_F(TlsTest, TheServerNameCheckedCanBeOtherThanTheAddress) {
  absl::StatusOr<StartedService> cm = Start({"--tls-cert", server_.cert, "--tls-key", server_.key});
  ASSERT_TRUE(cm.ok()) << cm.status();
  const std::string ca = ca_->files().cert;
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = ca}, .server_name = "cachemanager"}), grpc::StatusCode::OK);
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = ca}, .server_name = "worker"}), grpc::StatusCode::UNAVAILABLE)
      << "a certificate that does not carry the expected name";
}

TEST_F(TlsTest, ABadFileStopsTheServiceAtStartNamingIt) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert", server_.cert, "--tls-key", client_.key}, "does not match the certificate"},
      {{"--tls-cert", dir_.Path("missing.pem"), "--tls-key", server_.key}, "--tls-cert " + dir_.Path("missing.pem")},
      {{"--tls-cert", server_.key, "--tls-key", server_.key}, "holds no PEM certificate"},
      {{"--tls-cert", server_.cert, "--tls-key", server_.cert}, "holds no unencrypted PEM private key"},
      {{"--tls-cert", server_.cert}, "--tls-cert and --tls-key go together"},
      {{"--tls-client-ca", ca_->files().cert}, "--tls-client-ca requires"},
      {{"--tls-cert", server_.cert, "--tls-key", server_.key, "--tls-allowed-peers", "router"},
       "--tls-allowed-peers names client certificates: it needs --tls-client-ca"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    absl::StatusOr<StartedService> cm = Start(cases[i].args, "bad" + std::to_string(i) + ".log");
    ASSERT_FALSE(cm.ok()) << "case " << i << " started";
    EXPECT_NE(std::string(cm.status().message()).find(cases[i].expected), std::string::npos)
        << "case " << i << ": " << cm.status();
  }
}

TEST_F(TlsTest, ARotatedCertificateIsServedWithoutARestart) {
  const std::string cert = dir_.Path("live.pem"), key = dir_.Path("live.key");
  std::filesystem::copy_file(server_.cert, cert);
  std::filesystem::copy_file(server_.key, key);
  absl::StatusOr<StartedService> cm = Start({"--tls-cert", cert, "--tls-key", key});
  ASSERT_TRUE(cm.ok()) << cm.status();
  ASSERT_EQ(Call(cm->address, {.tls = {.ca = ca_->files().cert}}), grpc::StatusCode::OK);
  // The operator rotates to a certificate from another CA (key first, then
  // the certificate, as a cert-manager Secret update lands).
  std::filesystem::copy_file(stranger_.key, key, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(stranger_.cert, cert, std::filesystem::copy_options::overwrite_existing);
  bool rotated = false;
  for (int i = 0; i < 30 && !rotated; ++i) {  // the files are looked at every 10 s
    rotated = Call(cm->address, {.tls = {.ca = other_ca_->files().cert}}) == grpc::StatusCode::OK;
    if (!rotated) absl::SleepFor(absl::Seconds(1));
  }
  EXPECT_TRUE(rotated) << "the new certificate was never served";
  EXPECT_EQ(Call(cm->address, {.tls = {.ca = ca_->files().cert}}), grpc::StatusCode::UNAVAILABLE)
      << "the old certificate is no longer served";
  EXPECT_TRUE(cm->process->Running()) << "no restart";
}

}  // namespace
}  // namespace kvfleet::testing
