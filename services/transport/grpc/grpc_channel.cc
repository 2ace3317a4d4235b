#include "services/transport/grpc/grpc_channel.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "services/transport/grpc/internal_token.h"

namespace kvfleet::transport {
namespace {

std::shared_ptr<grpc::ChannelCredentials> Credentials(const TlsFiles& tls) {
  if (tls.ca.empty()) return grpc::InsecureChannelCredentials();
  auto files = tls.cert.empty()
                   ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.ca, kTlsRefreshSeconds)
                   : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.key, tls.cert, tls.ca,
                                                                                          kTlsRefreshSeconds);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(files);
  options.watch_root_certs();
  if (!tls.cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace

std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& address, const ClientChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a peer restarts; callers back off themselves.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!options.server_name.empty()) args.SetSslTargetNameOverride(options.server_name);
  if (options.internal_token.empty()) return grpc::CreateCustomChannel(address, Credentials(options.tls), args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<InternalTokenInterceptorFactory>(options.internal_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, Credentials(options.tls), args,
                                                                 std::move(interceptors));
}

}  // namespace kvfleet::transport
