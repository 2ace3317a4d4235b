#include "services/router/server/inference_service.h"

#include <grpc/grpc_security_constants.h>

#include <optional>
#include <string>
#include <vector>

namespace kvfleet::router {
namespace {

absl::StatusCode ToAbslCode(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

// The names the caller's verified client certificate carries (none without mutual TLS).
std::vector<std::string> PeerNames(const grpc::ServerContext& context) {
  std::vector<std::string> names;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return names;
  for (const char* property : {GRPC_X509_SAN_PROPERTY_NAME, GRPC_X509_CN_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property))
      names.emplace_back(value.data(), value.size());
  }
  return names;
}

// The authorization metadata's value, if sent.
std::optional<std::string> Authorization(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

absl::StatusOr<std::string> InferenceService::Authenticate(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return api_.Authenticate(nullptr);
  const std::string value(it->second.data(), it->second.size());
  return api_.Authenticate(&value);
}

grpc::Status InferenceService::Done(const char* method, grpc::Status status) {
  metrics_.RecordRequest(method, transport::StatusCodeLabel(ToAbslCode(status.error_code())));
  return status;
}

grpc::Status InferenceService::Generate(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                                        grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  return Generating("Generate", *context, [&](const CallContext& call, const std::string& tenant, auto arrival) {
    return api_.Generate(call, tenant, *request, arrival,
                         [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
  });
}

grpc::Status InferenceService::Chat(grpc::ServerContext* context, const v1::ChatRequest* request,
                                    grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  return Generating("Chat", *context, [&](const CallContext& call, const std::string& tenant, auto arrival) {
    return api_.Chat(call, tenant, *request, arrival,
                     [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
  });
}

grpc::Status InferenceService::Complete(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                                        v1::CompleteResponse* response) {
  auto collect = [response](const v1::GenerateTextResponse& r) {
    response->mutable_text()->append(r.text());
    response->mutable_token_ids()->MergeFrom(r.token_ids());
    response->set_worker_id(r.worker_id());
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      response->set_finish_reason(r.finish_reason());
      *response->mutable_usage() = r.usage();
    }
    return true;
  };
  return Generating("Complete", *context, [&](const CallContext& call, const std::string& tenant, auto arrival) {
    return api_.Generate(call, tenant, *request, arrival, collect);
  });
}

grpc::Status InferenceService::Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                                        v1::TokenizeResponse* response) {
  return Answering("Tokenize", *context, *response, [&] { return api_.Tokenize(*request); });
}

grpc::Status InferenceService::Detokenize(grpc::ServerContext* context, const v1::DetokenizeRequest* request,
                                          v1::DetokenizeResponse* response) {
  return Answering("Detokenize", *context, *response, [&] { return api_.Detokenize(*request); });
}

grpc::Status InferenceService::LoadLoraAdapter(grpc::ServerContext* context, const v1::LoraAdapterLoad* request,
                                               v1::LoraAdapterChange* response) {
  const std::optional<std::string> authorization = Authorization(*context);
  absl::StatusOr<v1::LoraAdapterChange> change =
      api_.LoadLoraAdapter(authorization ? &*authorization : nullptr, PeerNames(*context), *request);
  if (change.ok()) *response = *std::move(change);
  return Done("LoadLoraAdapter", transport::ToGrpcStatus(change.status()));
}

grpc::Status InferenceService::UnloadLoraAdapter(grpc::ServerContext* context, const v1::LoraAdapterUnload* request,
                                                 v1::LoraAdapterChange* response) {
  const std::optional<std::string> authorization = Authorization(*context);
  absl::StatusOr<v1::LoraAdapterChange> change =
      api_.UnloadLoraAdapter(authorization ? &*authorization : nullptr, PeerNames(*context), *request);
  if (change.ok()) *response = *std::move(change);
  return Done("UnloadLoraAdapter", transport::ToGrpcStatus(change.status()));
}

grpc::Status InferenceService::ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                                          v1::ListModelsResponse* response) {
  return Answering("ListModels", *context, *response,
                   [&]() -> absl::StatusOr<v1::ListModelsResponse> { return api_.ListModels(); });
}

}  // namespace kvfleet::router
