#include "services/transport/grpc/internal_token.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace kvfleet::transport {
namespace {

std::array<unsigned char, 32> Sha256(std::string_view text) {
  std::array<unsigned char, 32> d;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

class AddToken : public grpc::experimental::Interceptor {
 public:
  explicit AddToken(const std::string& token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kInternalTokenHeader, token_});
    }
    methods->Proceed();
  }

 private:
  const std::string& token_;
};

}  // namespace

InternalTokenChecker::InternalTokenChecker(const std::string& token) : digest_(Sha256(token)) {}

grpc::Status InternalTokenChecker::Process(const InputMetadata& auth_metadata, grpc::AuthContext*, OutputMetadata*,
                                           OutputMetadata*) {
  const auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end() && path->second.starts_with("/grpc.health.v1.Health/")) return grpc::Status::OK;
  const auto token = auth_metadata.find(kInternalTokenHeader);
  // Digests of equal length, so the comparison takes the same time whatever
  // the caller sent.
  if (token != auth_metadata.end() &&
      CRYPTO_memcmp(Sha256(std::string_view(token->second.data(), token->second.size())).data(), digest_.data(),
                    digest_.size()) == 0) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this internal service requires the cluster's internal token: start the caller with the same "
                      "--internal-token-file");
}

grpc::experimental::Interceptor* InternalTokenInterceptorFactory::CreateClientInterceptor(
    grpc::experimental::ClientRpcInfo*) {
  return new AddToken(token_);
}

}  // namespace kvfleet::transport
