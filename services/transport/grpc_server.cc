#include "services/transport/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"

namespace kvfleet::transport {

void RunningServer::SetServing(bool serving) const {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  for (const std::string& name : health_service_names) health->SetServingStatus(name, serving);
}

absl::StatusOr<RunningServer> StartGrpcServer(const GrpcServerOptions& options) {
  // Process-wide switches; both must be set before the builder runs.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int port = 0;
  // Credentials go here when TLS/mTLS lands; every service picks them up.
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // Clients keep idle connections alive with pings (CreateClientChannel);
  // accept them rather than answering with GOAWAY "too many pings".
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  for (grpc::Service* service : options.services) builder.RegisterService(service);

  RunningServer running;
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address,
                                               "; is the port in use, or the address not local?"));
  }
  running.port = port;
  const std::string host = options.address.substr(0, options.address.rfind(':'));
  running.address = absl::StrCat(host, ":", port);
  running.health_service_names = options.health_service_names;
  running.SetServing(false);
  return running;
}

}  // namespace kvfleet::transport
