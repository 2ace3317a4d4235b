#include "services/router/server/public_api.h"

#include <optional>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::router {
namespace {

// Seeds for sampled requests that gave none. Each thread's generator is
// seeded with 256 bits from the OS, so no two threads share a stream.
uint64_t FreshSeed() {
  thread_local std::mt19937_64 rng = [] {
    std::random_device os;
    std::seed_seq seq{os(), os(), os(), os(), os(), os(), os(), os()};
    return std::mt19937_64(seq);
  }();
  return rng();
}

absl::StatusCode ToAbslCode(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

}  // namespace

PublicApi::PublicApi(const ModelCatalog& models, GenerationRunner& runner, const WorkerPool& pool,
                     RouterMetrics& metrics, TenantTokens* tokens, const limits::RequestLimits& limits,
                     TenantQuotas* quotas)
    : models_(models),
      runner_(runner),
      pool_(pool),
      metrics_(metrics),
      tokens_(tokens),
      limits_(limits),
      quotas_(quotas) {}

absl::StatusOr<std::string> PublicApi::Authenticate(const std::string* authorization) const {
  if (tokens_ == nullptr) return std::string();
  // One answer whatever is wrong, so a caller learns nothing about which tokens exist.
  const absl::Status refused =
      absl::UnauthenticatedError("this router requires `authorization: Bearer <token>` with a token it knows");
  if (authorization == nullptr) return refused;
  absl::string_view value(*authorization);
  if (!absl::ConsumePrefix(&value, "Bearer ") && !absl::ConsumePrefix(&value, "bearer ")) return refused;
  std::optional<std::string> tenant = tokens_->Lookup(std::string_view(value.data(), value.size()));
  if (!tenant.has_value()) return refused;
  return *tenant;
}

absl::StatusOr<v1::GenerationOptions> PublicApi::ForTenant(const std::string& tenant,
                                                           const v1::GenerationOptions& options) const {
  v1::GenerationOptions out = options;
  if (tokens_ == nullptr) return out;
  // The client's salt is checked here, before the tenant's is folded in.
  if (options.cache_salt().size() > static_cast<size_t>(limits_.max_cache_salt_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("cache_salt is ", options.cache_salt().size(),
                                                   " bytes; the limit is ", limits_.max_cache_salt_bytes,
                                                   " bytes (the server's --max-cache-salt-bytes)"));
  }
  // Fixed length whatever the client sent; the tenant part cannot be forged
  // by a client salt because the two are hashed together with a separator.
  const TenantTokens::Digest d = TenantTokens::Sha256(absl::StrCat("tenant\x1f", tenant, "\x1f", options.cache_salt()));
  out.set_cache_salt(absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size())));
  return out;
}

PublicApi::Outcome PublicApi::ForTenantOutcome(const std::string& tenant, grpc::Status status,
                                               std::optional<std::chrono::milliseconds> retry_after) {
  metrics_.RecordTenantRequest(tenant, transport::StatusCodeLabel(ToAbslCode(status.error_code())));
  return {.status = std::move(status), .retry_after = retry_after};
}

PublicApi::Outcome PublicApi::RunPlan(const CallContext& call, const std::string& tenant, Clock::time_point arrival,
                                      const absl::StatusOr<GenerationPlan>& plan, const Sink& sink) {
  if (!plan.ok()) return ForTenantOutcome(tenant, transport::ToGrpcStatus(plan.status()));
  const int64_t prompt_tokens = static_cast<int64_t>(plan->prompt.size());
  std::optional<TenantQuotas::Lease> lease;
  if (quotas_ != nullptr) {
    TenantQuotas::Admission admission = quotas_->Admit(tenant, prompt_tokens);
    if (!admission.lease.has_value()) {
      metrics_.RecordQuotaRefusal(tenant, QuotaName(admission.refusal.kind));
      return ForTenantOutcome(tenant, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, admission.refusal.message),
                              admission.refusal.retry_after);
    }
    lease = std::move(admission.lease);
  }
  int64_t generated = 0;
  const Sink counting = [&](const v1::GenerateTextResponse& r) {
    generated += r.token_ids_size();
    return sink(r);
  };
  grpc::Status status = runner_.Run(call, *plan, arrival, counting);
  if (lease.has_value()) lease->Finish(generated);
  metrics_.RecordTenantTokens(tenant, prompt_tokens, generated);
  return ForTenantOutcome(tenant, std::move(status));
}

PublicApi::Outcome PublicApi::Generate(const CallContext& call, const std::string& tenant,
                                       const v1::GenerateTextRequest& request, Clock::time_point arrival,
                                       const Sink& sink, const ServedModel* resolved) {
  absl::StatusOr<v1::GenerationOptions> options = ForTenant(tenant, request.options());
  if (!options.ok()) return ForTenantOutcome(tenant, transport::ToGrpcStatus(options.status()));
  v1::GenerateTextRequest own = request;
  *own.mutable_options() = *std::move(options);
  absl::StatusOr<ServedModel> model = resolved != nullptr ? *resolved : Resolve(own.options());
  if (!model.ok()) return RunPlan(call, tenant, arrival, model.status(), sink);
  return RunPlan(call, tenant, arrival, PlanGenerate(*model, own, FreshSeed(), limits_), sink);
}

PublicApi::Outcome PublicApi::Chat(const CallContext& call, const std::string& tenant, const v1::ChatRequest& request,
                                   Clock::time_point arrival, const Sink& sink, const openai::SentConversation* sent,
                                   const ServedModel* resolved) {
  absl::StatusOr<v1::GenerationOptions> options = ForTenant(tenant, request.options());
  if (!options.ok()) return ForTenantOutcome(tenant, transport::ToGrpcStatus(options.status()));
  v1::ChatRequest own = request;
  *own.mutable_options() = *std::move(options);
  absl::StatusOr<ServedModel> model = resolved != nullptr ? *resolved : Resolve(own.options());
  if (!model.ok()) return RunPlan(call, tenant, arrival, model.status(), sink);
  return RunPlan(call, tenant, arrival, PlanChat(*model, own, FreshSeed(), limits_, sent), sink);
}

absl::StatusOr<std::vector<int32_t>> PublicApi::TokenizeChat(const v1::ChatRequest& request,
                                                             const openai::SentConversation* sent) const {
  ASSIGN_OR_RETURN(ServedModel model, Resolve(request.options().model()));
  ASSIGN_OR_RETURN(ChatPrompt prompt, EncodeChatRequest(*model.model, request, limits_, sent));
  return std::move(prompt.ids);
}

absl::StatusOr<v1::TokenizeResponse> PublicApi::Tokenize(const v1::TokenizeRequest& request) const {
  ASSIGN_OR_RETURN(ServedModel model, Resolve(request.model()));
  RETURN_IF_ERROR(limits::CheckPromptBytes(limits_, "text", static_cast<int64_t>(request.text().size())));
  absl::StatusOr<std::vector<model::TokenId>> ids = model.model->tokenizer().Encode(
      request.text(), {.add_special = request.add_bos(), .parse_special = request.parse_special()});
  if (!ids.ok()) return ids.status();
  v1::TokenizeResponse response;
  response.mutable_token_ids()->Assign(ids->begin(), ids->end());
  return response;
}

absl::StatusOr<v1::DetokenizeResponse> PublicApi::Detokenize(const v1::DetokenizeRequest& request) const {
  ASSIGN_OR_RETURN(ServedModel model, Resolve(request.model()));
  const std::vector<model::TokenId> ids(request.token_ids().begin(), request.token_ids().end());
  if (absl::Status s = model.model->CheckTokenIds(ids, "token_ids"); !s.ok()) return s;
  // Through the incremental detokenizer so the text is valid UTF-8 (a
  // proto string must be).
  model::IncrementalDetokenizer detokenizer(model.model->tokenizer(), {.skip_special = request.skip_special()});
  v1::DetokenizeResponse response;
  std::string& text = *response.mutable_text();
  for (model::TokenId id : ids) {
    absl::StatusOr<std::string> piece = detokenizer.Push(id);
    if (!piece.ok()) return piece.status();
    text += *piece;
  }
  text += detokenizer.Finish();
  return response;
}

absl::StatusOr<ServedModel> PublicApi::Resolve(const std::string& name) const {
  absl::StatusOr<ServedModel> model = models_.Resolve(name);
  if (!model.ok() && model.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat(model.status().message(), " (ListModels, GET /v1/models)"));
  }
  return model;
}

absl::StatusOr<ServedModel> PublicApi::Resolve(const v1::GenerationOptions& options) const {
  ASSIGN_OR_RETURN(ServedModel model, Resolve(options.model()));
  if (options.lora_adapter().empty() || options.lora_adapter() == model.lora) return model;
  if (!model.lora.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", options.model(), "' is itself a LoRA adapter; name its ",
                                                   "base model with lora_adapter '", options.lora_adapter(), "'"));
  }
  return models_.ResolveAdapter(model, options.lora_adapter());
}

namespace {

// The base model an admin call names: a model, not an adapter.
absl::StatusOr<ServedModel> AdminBase(const PublicApi& api, const std::string& name) {
  ASSIGN_OR_RETURN(ServedModel base, api.Resolve(name));
  if (!base.lora.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is a LoRA adapter of '", base.model->served_name(), "'; name the base model"));
  }
  return base;
}

v1::LoraAdapterChange ToProto(const AdapterChange& c, const ServedModel& base) {
  v1::LoraAdapterChange out;
  out.set_lora_name(c.name);
  out.set_parent(base.model->served_name());
  out.set_digest(c.digest);
  out.set_rank(c.rank);
  out.set_workers(c.workers);
  out.set_seconds(c.seconds);
  return out;
}

}  // namespace

absl::StatusOr<v1::LoraAdapterChange> PublicApi::LoadLoraAdapter(const std::string* authorization,
                                                                 const std::vector<std::string>& peer_names,
                                                                 const v1::LoraAdapterLoad& request) {
  if (adapter_admin_ == nullptr || admin_identity_ == nullptr) {
    return absl::FailedPreconditionError("this router does not manage LoRA adapters");
  }
  ASSIGN_OR_RETURN(const std::string admin, admin_identity_->Check(authorization, peer_names));
  if (request.lora_name().empty() || request.lora_path().empty()) {
    return absl::InvalidArgumentError("loading a LoRA adapter needs lora_name and lora_path");
  }
  ASSIGN_OR_RETURN(const ServedModel base, AdminBase(*this, request.model()));
  KVFLEET_LOG_INFO("admin {} loads LoRA adapter '{}' from {} for model {}", admin, request.lora_name(),
                   request.lora_path(), base.model->id());
  ASSIGN_OR_RETURN(const AdapterChange change,
                   adapter_admin_->Load(base.model->id(), request.lora_name(), request.lora_path()));
  return ToProto(change, base);
}

absl::StatusOr<v1::LoraAdapterChange> PublicApi::UnloadLoraAdapter(const std::string* authorization,
                                                                   const std::vector<std::string>& peer_names,
                                                                   const v1::LoraAdapterUnload& request) {
  if (adapter_admin_ == nullptr || admin_identity_ == nullptr) {
    return absl::FailedPreconditionError("this router does not manage LoRA adapters");
  }
  ASSIGN_OR_RETURN(const std::string admin, admin_identity_->Check(authorization, peer_names));
  if (request.lora_name().empty()) return absl::InvalidArgumentError("unloading a LoRA adapter needs lora_name");
  ASSIGN_OR_RETURN(const ServedModel base, AdminBase(*this, request.model()));
  KVFLEET_LOG_INFO("admin {} unloads LoRA adapter '{}' of model {}", admin, request.lora_name(), base.model->id());
  ASSIGN_OR_RETURN(const AdapterChange change, adapter_admin_->Unload(base.model->id(), request.lora_name()));
  return ToProto(change, base);
}

v1::ListModelsResponse PublicApi::ListModels() const {
  v1::ListModelsResponse response;
  for (const ServedModel& served : models_.Models()) {
    const RouterModel& model = *served.model;
    const int32_t live = pool_.Counts(model.id()).routable;
    if (live == 0 && !models_.fixed()) continue;  // every worker of it left: listed again when one returns
    v1::ModelInfo& m = *response.add_models();
    m.set_id(model.served_name());
    m.set_max_context(model.context_length());
    m.set_vocab_size(model.vocab_size());
    m.set_live_workers(live);
    for (const ModelCatalog::ServedAdapter& a : models_.Adapters(model.id())) {
      v1::ModelInfo& adapter = *response.add_models();
      adapter.set_id(a.name);
      adapter.set_max_context(model.context_length());
      adapter.set_vocab_size(model.vocab_size());
      adapter.set_live_workers(static_cast<int32_t>(a.holders.size()));
      adapter.set_parent(model.served_name());
      adapter.set_lora_digest(a.digest);
    }
  }
  return response;
}

}  // namespace kvfleet::router
