#include "services/transport/grpc/peer_authorizer.h"

#include <grpc/grpc_security_constants.h>

#include "common/logging.h"

namespace kvfleet::transport {

PeerAuthorizer::PeerAuthorizer(const std::vector<std::string>& allowed_names)
    : allowed_(allowed_names.begin(), allowed_names.end()) {}

grpc::Status PeerAuthorizer::Process(const InputMetadata&, grpc::AuthContext* context, OutputMetadata*,
                                     OutputMetadata*) {
  std::string seen;
  for (const char* property : {GRPC_X509_SAN_PROPERTY_NAME, GRPC_X509_CN_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : context->FindPropertyValues(property)) {
      const std::string name(value.data(), value.size());
      if (allowed_.count(name) > 0) return grpc::Status::OK;
      if (seen.size() < 256) seen += (seen.empty() ? "" : ", ") + name;
    }
  }
  KVFLEET_LOG_WARN("refused a TLS client whose certificate names [{}]: not in --tls-allowed-peers", seen);
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "this client's certificate does not name a peer allowed to call this service");
}

}  // namespace kvfleet::transport
