// A shared secret on the cluster's internal calls when TLS is off: a
// plaintext loopback cluster (`kvfleet up --internal-token`) still keeps
// other local users' processes from driving its workers or rewriting the
// cachemanager's index. Clients put the token in a header on every call;
// servers check it before the call reaches a service. With TLS, mutual TLS
// and the allowed peer names do this job instead.
//
// The server side uses gRPC's local (loopback-only) credentials, the one
// plaintext transport that takes an authorisation hook, so a server with a
// token refuses connections from other hosts.
//
// Thread-safety: both are immutable after construction; gRPC calls them
// concurrently.
#pragma once

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/support/client_interceptor.h>

#include <array>
#include <string>

namespace kvfleet::transport {

inline constexpr char kInternalTokenHeader[] = "x-kvfleet-internal-token";

class InternalTokenChecker : public grpc::AuthMetadataProcessor {
 public:
  explicit InternalTokenChecker(const std::string& token);

  bool IsBlocking() const override { return false; }
  // OK for health checks and for calls carrying the token (compared in
  // constant time); UNAUTHENTICATED otherwise, naming the flag to set.
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* response) override;

 private:
  std::array<unsigned char, 32> digest_;
};

// Adds the token to every call of a channel (CreateClientChannel).
class InternalTokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit InternalTokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo* info) override;

 private:
  std::string token_;
};

}  // namespace kvfleet::transport
