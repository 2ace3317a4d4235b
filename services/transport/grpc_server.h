// The one place kvfleet's services build a gRPC server, so credentials
// (TLS/mTLS), interceptors (auth, tracing) and limits are added once for
// every service. Adds grpc.health.v1 and server reflection.
//
// Thread-safety: the returned server is gRPC's; health updates are thread-safe.
//
//   ASSIGN_OR_RETURN(RunningServer s, StartGrpcServer({.address = "127.0.0.1:0", .services = {&svc}}));
//   s.SetServing(true);   // health: SERVING
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace kvfleet::transport {

struct GrpcServerOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::vector<grpc::Service*> services;  // must outlive the server
  // Larger messages get RESOURCE_EXHAUSTED from gRPC itself.
  int32_t max_receive_message_bytes = 1 << 20;
  // Names reported by grpc.health.v1 besides the server-wide "" entry.
  std::vector<std::string> health_service_names;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // with the port actually bound
  int port = 0;

  // Sets grpc.health.v1 to SERVING or NOT_SERVING for "" and every named service.
  void SetServing(bool serving) const;

  std::vector<std::string> health_service_names;
};

// Binds and starts the server with health NOT_SERVING (callers flip it once
// ready). UNAVAILABLE naming the address when it cannot be bound.
absl::StatusOr<RunningServer> StartGrpcServer(const GrpcServerOptions& options);

}  // namespace kvfleet::transport
