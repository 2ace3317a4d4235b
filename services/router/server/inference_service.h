// The public API (proto/kvfleet/v1/inference.proto) over gRPC: reads the
// bearer token from the call's metadata, hands each call to PublicApi (the
// behaviour both front ends share) and records it by method and code. A
// quota's refusal carries `grpc-retry-pushback-ms` and `retry-after-ms`
// trailers saying when to retry. Translation only.
//
// It is a synchronous gRPC service: each call holds a gRPC thread while it
// streams, blocking on its worker call. The router does no heavy work per
// token, and a blocking call keeps failover a plain loop; the cost is a
// thread per stream in flight (noted in docs/architecture.md; the callback
// API is the way past a few thousand streams per router).
//
// Health is a separate service and needs no token.
//
// Thread-safety: gRPC calls the methods from many threads at once.
//
//   PublicApi api(model, runner, pool, metrics, tokens.get(), limits, quotas.get());
//   InferenceService service(api, metrics);
//   StartGrpcServer({.services = {&service}, ...});
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "kvfleet/v1/inference.grpc.pb.h"
#include "services/router/server/public_api.h"
#include "services/router/server/router_metrics.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::router {

class InferenceService final : public v1::Inference::Service {
 public:
  InferenceService(PublicApi& api, RouterMetrics& metrics) : api_(api), metrics_(metrics) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                        grpc::ServerWriter<v1::GenerateTextResponse>* writer) override;
  grpc::Status Complete(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                        v1::CompleteResponse* response) override;
  grpc::Status Chat(grpc::ServerContext* context, const v1::ChatRequest* request,
                    grpc::ServerWriter<v1::GenerateTextResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status Detokenize(grpc::ServerContext* context, const v1::DetokenizeRequest* request,
                          v1::DetokenizeResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status LoadLoraAdapter(grpc::ServerContext* context, const v1::LoraAdapterLoad* request,
                               v1::LoraAdapterChange* response) override;
  grpc::Status UnloadLoraAdapter(grpc::ServerContext* context, const v1::LoraAdapterUnload* request,
                                 v1::LoraAdapterChange* response) override;

 private:
  // Records the call's status in the metrics and returns it.
  grpc::Status Done(const char* method, grpc::Status status);
  // The tenant the call's `authorization` metadata names.
  absl::StatusOr<std::string> Authenticate(const grpc::ServerContext& context) const;
  // A generating call: authenticated, run by `run` (a PublicApi method),
  // a quota's retry hint put in the trailers.
  template <typename Run>
  grpc::Status Generating(const char* method, grpc::ServerContext& context, const Run& run) {
    const auto arrival = PublicApi::Clock::now();
    absl::StatusOr<std::string> tenant = Authenticate(context);
    if (!tenant.ok()) return Done(method, transport::ToGrpcStatus(tenant.status()));
    PublicApi::Outcome outcome = run(GrpcCallContext(context), *tenant, arrival);
    if (outcome.retry_after.has_value()) {
      const std::string wait = std::to_string(outcome.retry_after->count());
      // gRPC's own retry policy reads grpc-retry-pushback-ms; others read ours.
      context.AddTrailingMetadata("grpc-retry-pushback-ms", wait);
      context.AddTrailingMetadata("retry-after-ms", wait);
    }
    return Done(method, std::move(outcome.status));
  }
  // A unary call answered from the model or the pool.
  template <typename Response, typename Answer>
  grpc::Status Answering(const char* method, grpc::ServerContext& context, Response& response, const Answer& answer) {
    if (absl::Status s = Authenticate(context).status(); !s.ok()) return Done(method, transport::ToGrpcStatus(s));
    absl::StatusOr<Response> r = answer();
    if (!r.ok()) return Done(method, transport::ToGrpcStatus(r.status()));
    response = *std::move(r);
    return Done(method, grpc::Status::OK);
  }

  PublicApi& api_;
  RouterMetrics& metrics_;
};

}  // namespace kvfleet::router
