// Authorises a TLS client by the identity its certificate names, not only
// by its chain: with mutual TLS a valid certificate proves who signed it,
// and every service's certificate is signed by the same CA; only the name
// says whether it is a router (which may call workers) or a worker (which
// may not). Plugged into the server's credentials; the call never reaches a
// service when it refuses.
//
// Thread-safety: immutable after construction; gRPC calls it concurrently.
#pragma once

#include <grpcpp/security/auth_metadata_processor.h>

#include <set>
#include <string>
#include <vector>

namespace kvfleet::transport {

class PeerAuthorizer : public grpc::AuthMetadataProcessor {
 public:
  // Names a client certificate must carry, as a DNS subject alternative
  // name or its common name.
  explicit PeerAuthorizer(const std::vector<std::string>& allowed_names);

  bool IsBlocking() const override { return false; }
  // OK when the peer's certificate names an allowed peer; PERMISSION_DENIED
  // otherwise, without saying which names would do.
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* response) override;

 private:
  std::set<std::string> allowed_;
};

}  // namespace kvfleet::transport
