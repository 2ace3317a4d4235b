// The one place kvfleet's services build a gRPC server, so credentials
// (TLS/mTLS), interceptors (auth, tracing) and limits are added once for
// every service. Adds grpc.health.v1 and server reflection.
//
// Health has two questions, asked by different callers:
//   readiness: "" and every name in health_service_names. Should traffic
//              come here? (off while loading, draining or stalled)
//   liveness:  the name "liveness". Is this process still doing its job?
//              (stays on while draining, so a drain is never killed early)
// Both are served on the main port and, when health_port is set, on a
// second plaintext port that serves grpc.health.v1 and nothing else:
// Kubernetes' gRPC probes cannot speak TLS, the main port will.
//
// Thread-safety: the returned servers are gRPC's; health updates are thread-safe.
//
//   ASSIGN_OR_RETURN(RunningServer s, StartGrpcServer({.address = "127.0.0.1:0", .services = {&svc}}));
//   s.SetLive(true);
//   s.SetReady(true);
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/transport/tls/tls_files.h"

namespace kvfleet::transport {

// The grpc.health.v1 service name that answers liveness.
inline constexpr char kLivenessServiceName[] = "liveness";

struct GrpcServerOptions {
  std::string address = "127.0.0.1:0";   // host:port; port 0 picks a free one
  std::vector<grpc::Service*> services;  // must outlive the server
  // Larger messages and metadata get RESOURCE_EXHAUSTED from gRPC itself;
  // calls beyond max_concurrent_streams on one connection wait.
  int32_t max_receive_message_bytes = 1 << 20;
  int32_t max_metadata_bytes = 16 << 10;
  int32_t max_concurrent_streams = 1024;
  // Non-empty (TLS off only): every call but health must carry this token
  // (internal_token.h); the port then accepts loopback peers only.
  std::string internal_token;
  // Readiness names reported by grpc.health.v1 besides the server-wide "".
  std::vector<std::string> health_service_names;
  // The plaintext health-only port: -1 none, 0 a free one.
  int health_port = -1;
  std::string health_host = "0.0.0.0";
  // TLS on `address` when tls.serves_tls() (the health port stays plaintext);
  // with tls.client_ca, mutual TLS. The files are assumed checked (CheckTlsFiles).
  TlsFiles tls;
  // With tls.client_ca: only clients whose certificate names one of these
  // (DNS SAN or common name) may call; empty: any certificate the CA signed.
  std::vector<std::string> allowed_peers;
  // Server reflection (grpcurl lists and calls methods without the protos);
  // off for a port exposed to callers who need not discover the API.
  bool reflection = true;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // with the port actually bound
  int port = 0;
  std::unique_ptr<grpc::CallbackGenericService> health_unknown_methods;  // outlives health_server
  std::unique_ptr<grpc::Server> health_server;                           // null without a health port
  std::string health_address;                                            // empty without a health port

  // Readiness: "" and every named service, on both ports.
  void SetReady(bool ready) const;
  // Liveness: kLivenessServiceName, on both ports.
  void SetLive(bool live) const;
  // Stops the main server (calls in flight get until `deadline`), then the health port.
  void Shutdown(std::chrono::system_clock::time_point deadline) const;

  std::vector<std::string> health_service_names;
};

// Binds and starts the server (and the health port) with readiness and
// liveness NOT_SERVING: callers flip them once ready. UNAVAILABLE naming
// the address when one cannot be bound.
absl::StatusOr<RunningServer> StartGrpcServer(const GrpcServerOptions& options);

}  // namespace kvfleet::transport
