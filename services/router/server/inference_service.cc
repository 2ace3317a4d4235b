#include "services/router/server/inference_service.h"

namespace kvfleet::router {
namespace {

absl::StatusCode ToAbslCode(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

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

grpc::Status InferenceService::ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                                          v1::ListModelsResponse* response) {
  return Answering("ListModels", *context, *response,
                   [&]() -> absl::StatusOr<v1::ListModelsResponse> { return api_.ListModels(); });
}

}  // namespace kvfleet::router
