// The public API's behaviour, whatever carries it: the gRPC Inference
// service and the OpenAI-compatible HTTP port both translate their calls
// into these methods, so authentication, tenant cache salts, quotas,
// validation, placement, failover and the tenant metrics are one code path
// (docs/api.md). No transport here beyond the runner's CallContext.
//
// Authentication. With tenant tokens (--auth-tokens), every method but
// health requires `authorization: Bearer <token>` (UNAUTHENTICATED
// otherwise, the same answer for a missing and an unknown token), and a
// tenant's generations carry a cache salt derived from the tenant and the
// salt the client sent, so tenants neither share nor can probe each other's
// cached prefixes.
//
// Quotas (--tenant-*). A generating call over its tenant's quota ends
// RESOURCE_EXHAUSTED naming the quota, and the outcome says when to retry
// (the front end puts it in a trailer or a Retry-After header).
//
// Thread-safety: every method may be called from many threads at once.
//
//   PublicApi api(catalog, runner, pool, metrics, tokens.get(), limits, quotas.get());  // null: none
//   ASSIGN_OR_RETURN(std::string tenant, api.Authenticate(authorization_header));
//   PublicApi::Outcome o = api.Chat(call, tenant, request, arrival, sink);
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvfleet/v1/inference.pb.h"
#include "services/limits/request_limits.h"
#include "services/router/frontend/admin_identity.h"
#include "services/router/frontend/router_model.h"
#include "services/router/frontend/tenant_quota.h"
#include "services/router/frontend/tenant_tokens.h"
#include "services/router/openai/openai_request.h"
#include "services/router/server/adapter_admin.h"
#include "services/router/server/call_context.h"
#include "services/router/server/generation_runner.h"
#include "services/router/server/model_catalog.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

class PublicApi {
 public:
  using Clock = GenerationRunner::Clock;
  using Sink = GenerationRunner::Sink;

  struct Outcome {
    grpc::Status status;
    // With a quota's refusal: when the tenant may retry.
    std::optional<std::chrono::milliseconds> retry_after;
  };

  PublicApi(const ModelCatalog& models, GenerationRunner& runner, const WorkerPool& pool, RouterMetrics& metrics,
            TenantTokens* tokens = nullptr, const limits::RequestLimits& limits = {}, TenantQuotas* quotas = nullptr);

  // The caller's tenant ("" with auth off) from its `authorization` header
  // or metadata value (nullptr: none sent), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Authenticate(const std::string* authorization) const;

  // Generating calls for an authenticated tenant: every message went
  // through `sink` before the outcome, the last with finish_reason and usage.
  // `model`: the request's model when the caller already resolved it
  // (Resolve); null: resolved here.
  Outcome Generate(const CallContext& call, const std::string& tenant, const v1::GenerateTextRequest& request,
                   Clock::time_point arrival, const Sink& sink, const ServedModel* model = nullptr);
  // `sent`: the conversation as the client sent it (the OpenAI-compatible
  // API), which the template then renders; null: built from `request`.
  Outcome Chat(const CallContext& call, const std::string& tenant, const v1::ChatRequest& request,
               Clock::time_point arrival, const Sink& sink, const openai::SentConversation* sent = nullptr,
               const ServedModel* model = nullptr);

  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request) const;

  // The admin calls: the admin identity is checked first (`authorization`
  // as for Authenticate, `peer_names` from the caller's verified client
  // certificate), then the base model resolved, then every worker asked
  // (adapter_admin.h). FAILED_PRECONDITION without SetAdapterAdmin.
  absl::StatusOr<v1::LoraAdapterChange> LoadLoraAdapter(const std::string* authorization,
                                                        const std::vector<std::string>& peer_names,
                                                        const v1::LoraAdapterLoad& request);
  absl::StatusOr<v1::LoraAdapterChange> UnloadLoraAdapter(const std::string* authorization,
                                                          const std::vector<std::string>& peer_names,
                                                          const v1::LoraAdapterUnload& request);
  // Both must outlive the API; set before serving.
  void SetAdapterAdmin(AdapterAdmin* admin, const AdminIdentity* identity) {
    adapter_admin_ = admin;
    admin_identity_ = identity;
  }
  // A chat request's prompt, as Chat would send it (its messages, tools and
  // kwargs through the template).
  absl::StatusOr<std::vector<int32_t>> TokenizeChat(const v1::ChatRequest& request,
                                                    const openai::SentConversation* sent = nullptr) const;
  // The ids' text, valid UTF-8 (a character cut off at the end becomes U+FFFD).
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request) const;
  // Every model with a live worker (and a router's --model always).
  v1::ListModelsResponse ListModels() const;
  // The model a request names (ModelCatalog::Resolve): NOT_FOUND, saying
  // where the served ones are listed, for a name no worker serves.
  absl::StatusOr<ServedModel> Resolve(const std::string& name) const;
  // The model, under options.lora_adapter when it names one.
  absl::StatusOr<ServedModel> Resolve(const v1::GenerationOptions& options) const;
  const limits::RequestLimits& limits() const { return limits_; }

 private:
  // `options` with the tenant's salt folded in; INVALID_ARGUMENT for a salt too long.
  absl::StatusOr<v1::GenerationOptions> ForTenant(const std::string& tenant,
                                                  const v1::GenerationOptions& options) const;
  // The plan's error, the tenant quota's refusal, or the runner's status,
  // recorded in the tenant metrics.
  Outcome RunPlan(const CallContext& call, const std::string& tenant, Clock::time_point arrival,
                  const absl::StatusOr<GenerationPlan>& plan, const Sink& sink);
  Outcome ForTenantOutcome(const std::string& tenant, grpc::Status status,
                           std::optional<std::chrono::milliseconds> retry_after = std::nullopt);

  const ModelCatalog& models_;
  GenerationRunner& runner_;
  const WorkerPool& pool_;
  RouterMetrics& metrics_;
  TenantTokens* tokens_;
  const limits::RequestLimits limits_;
  TenantQuotas* quotas_;
  AdapterAdmin* adapter_admin_ = nullptr;
  const AdminIdentity* admin_identity_ = nullptr;
};

}  // namespace kvfleet::router
