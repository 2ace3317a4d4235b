#include "services/transport/grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/transport/grpc/internal_token.h"
#include "services/transport/grpc/peer_authorizer.h"

namespace kvfleet::transport {
namespace {

void SetStatus(grpc::Server* server, const std::string& name, bool serving) {
  if (server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  // Always by name: the nameless overload sets every name at once,
  // liveness included.
  if (health != nullptr) health->SetServingStatus(name, serving);
}

// Drops the builder plugins linked into the process (server reflection
// registers itself when its library loads).
class WithoutPlugins : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override { plugins->clear(); }
};

// gRPC binds with SO_REUSEPORT by default: a second process on a port in use
// would start and silently share its traffic (and its probes). Refused instead.
void ExclusivePort(grpc::ServerBuilder& builder) { builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0); }

std::shared_ptr<grpc::ServerCredentials> Credentials(const TlsFiles& tls, const std::vector<std::string>& allowed_peers,
                                                     const std::string& internal_token) {
  if (!tls.serves_tls() && !internal_token.empty()) {
    // Plaintext credentials take no authorisation hook; local ones do.
    auto local = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
    local->SetAuthMetadataProcessor(std::make_shared<InternalTokenChecker>(internal_token));
    return local;
  }
  if (!tls.serves_tls()) return grpc::InsecureServerCredentials();
  auto files = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.key, tls.cert, tls.client_ca,
                                                                                    kTlsRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(files);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::experimental::TlsServerCredentials(options);
  if (!allowed_peers.empty()) credentials->SetAuthMetadataProcessor(std::make_shared<PeerAuthorizer>(allowed_peers));
  return credentials;
}

absl::Status CannotListen(const std::string& address) {
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", address, "; is the port in use, or the address not local?"));
}

// A server with grpc.health.v1 alone: no services, no plugins, and every
// other method answered UNIMPLEMENTED by `unknown_methods` (gRPC refuses to
// build a server with nothing to poll before health is added).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthOnlyServer(const std::string& address,
                                                                    grpc::CallbackGenericService* unknown_methods,
                                                                    int* port) {
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<WithoutPlugins>());
  builder.RegisterCallbackGenericService(unknown_methods);
  ExclusivePort(builder);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) return CannotListen(address);
  return server;
}

}  // namespace

void RunningServer::SetReady(bool ready) const {
  for (grpc::Server* s : {server.get(), health_server.get()}) {
    SetStatus(s, "", ready);
    for (const std::string& name : health_service_names) SetStatus(s, name, ready);
  }
}

void RunningServer::SetLive(bool live) const {
  for (grpc::Server* s : {server.get(), health_server.get()}) SetStatus(s, kLivenessServiceName, live);
}

void RunningServer::Shutdown(std::chrono::system_clock::time_point deadline) const {
  server->Shutdown(deadline);
  if (health_server != nullptr) health_server->Shutdown(std::chrono::system_clock::now());
}

absl::StatusOr<RunningServer> StartGrpcServer(const GrpcServerOptions& options) {
  // Process-wide switches; both must be set before a builder runs.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  RunningServer running;
  if (options.health_port >= 0) {
    const std::string address = absl::StrCat(options.health_host, ":", options.health_port);
    int port = 0;
    running.health_unknown_methods = std::make_unique<grpc::CallbackGenericService>();
    auto health = StartHealthOnlyServer(address, running.health_unknown_methods.get(), &port);
    if (!health.ok()) return health.status();
    running.health_server = std::move(*health);
    running.health_address = absl::StrCat(options.health_host, ":", port);
  }

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, Credentials(options.tls, options.allowed_peers, options.internal_token),
                           &port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, options.max_metadata_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  ExclusivePort(builder);
  if (!options.reflection) builder.SetOption(std::make_unique<WithoutPlugins>());
  // Clients keep idle connections alive with pings (CreateClientChannel);
  // accept them rather than answering with GOAWAY "too many pings".
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  for (grpc::Service* service : options.services) builder.RegisterService(service);

  running.server = builder.BuildAndStart();
  if (running.server == nullptr || port == 0) return CannotListen(options.address);
  running.port = port;
  const std::string host = options.address.substr(0, options.address.rfind(':'));
  running.address = absl::StrCat(host, ":", port);
  running.health_service_names = options.health_service_names;
  running.SetReady(false);
  running.SetLive(false);
  return running;
}

}  // namespace kvfleet::transport
