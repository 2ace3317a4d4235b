// The public API (proto/kvfleet/v1/inference.proto) over gRPC: turns each
// call into a GenerationPlan and runs it through the GenerationRunner, or
// answers it from the model's tokenizer (Tokenize, Detokenize) and the pool
// (ListModels). Translation only.
//
// It is a synchronous gRPC service: each call holds a gRPC thread while it
// streams, blocking on its worker call. The router does no heavy work per
// token, and a blocking call keeps failover a plain loop; the cost is a
// thread per stream in flight (noted in docs/architecture.md; the callback
// API is the way past a few thousand streams per router).
//
// With tenant tokens (--auth-tokens), every method requires
// `authorization: Bearer <token>` (UNAUTHENTICATED otherwise, the same answer
// for a missing and an unknown token), and a tenant's generations carry a
// cache salt derived from the tenant and the salt the client sent, so
// tenants neither share nor can probe each other's cached prefixes. Health
// is a separate service and needs no token.
//
// With quotas (--tenant-*), a generating call over its tenant's quota ends
// RESOURCE_EXHAUSTED naming the quota, with `grpc-retry-pushback-ms` and
// `retry-after-ms` trailers saying when to retry.
//
// Thread-safety: gRPC calls the methods from many threads at once.
//
//   InferenceService service(model, runner, pool, metrics, tokens.get(), limits, quotas.get());  // null: none
//   StartGrpcServer({.services = {&service}, ...});
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "kvfleet/v1/inference.grpc.pb.h"
#include "services/limits/request_limits.h"
#include "services/router/frontend/router_model.h"
#include "services/router/frontend/tenant_quota.h"
#include "services/router/frontend/tenant_tokens.h"
#include "services/router/server/generation_runner.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/worker_pool.h"
#include "services/transport/grpc_status.h"

namespace kvfleet::router {

class InferenceService final : public v1::Inference::Service {
 public:
  InferenceService(const RouterModel& model, GenerationRunner& runner, const WorkerPool& pool, RouterMetrics& metrics,
                   TenantTokens* tokens = nullptr, const limits::RequestLimits& limits = {},
                   TenantQuotas* quotas = nullptr);

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

 private:
  // Records the call's status in the metrics and returns it.
  grpc::Status Done(const char* method, grpc::Status status);
  // A generating call: the plan's error, the tenant quota's refusal (with
  // a retry hint in the trailers), or the runner's status, recorded.
  grpc::Status RunPlan(const char* method, grpc::ServerContext& context, const std::string& tenant,
                       GenerationRunner::Clock::time_point arrival, const absl::StatusOr<GenerationPlan>& plan,
                       const GenerationRunner::Sink& sink);
  grpc::Status DoneForTenant(const char* method, const std::string& tenant, grpc::Status status);

  // The caller's tenant ("" with auth off), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Authenticate(const grpc::ServerContext& context) const;
  // `options` with the tenant's salt folded in; INVALID_ARGUMENT for a salt too long.
  absl::StatusOr<v1::GenerationOptions> ForTenant(const std::string& tenant, const v1::GenerationOptions& options) const;
  // A generating call (Generate, Complete, Chat): authenticated, its
  // options ForTenant, planned by `plan`, then RunPlan.
  template <typename Request, typename Plan>
  grpc::Status Generating(const char* method, grpc::ServerContext& context, const Request& request, const Plan& plan,
                          const GenerationRunner::Sink& sink) {
    const auto arrival = GenerationRunner::Clock::now();
    absl::StatusOr<std::string> tenant = Authenticate(context);
    if (!tenant.ok()) return Done(method, transport::ToGrpcStatus(tenant.status()));
    absl::StatusOr<v1::GenerationOptions> options = ForTenant(*tenant, request.options());
    if (!options.ok()) return DoneForTenant(method, *tenant, transport::ToGrpcStatus(options.status()));
    Request own = request;
    *own.mutable_options() = *std::move(options);
    return RunPlan(method, context, *tenant, arrival, plan(own), sink);
  }

  const RouterModel& model_;
  GenerationRunner& runner_;
  const WorkerPool& pool_;
  RouterMetrics& metrics_;
  TenantTokens* tokens_;
  const limits::RequestLimits limits_;
  TenantQuotas* quotas_;
};

}  // namespace kvfleet::router
