#include "services/router/server/inference_service.h"

#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "services/transport/grpc_status.h"

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

InferenceService::InferenceService(const RouterModel& model, GenerationRunner& runner, const WorkerPool& pool,
                                   RouterMetrics& metrics, TenantTokens* tokens, const limits::RequestLimits& limits,
                                   TenantQuotas* quotas)
    : model_(model),
      runner_(runner),
      pool_(pool),
      metrics_(metrics),
      tokens_(tokens),
      limits_(limits),
      quotas_(quotas) {}

absl::StatusOr<std::string> InferenceService::Authenticate(const grpc::ServerContext& context) const {
  if (tokens_ == nullptr) return std::string();
  // One answer whatever is wrong, so a caller learns nothing about which tokens exist.
  const absl::Status refused = absl::UnauthenticatedError(
      "this router requires `authorization: Bearer <token>` with a token it knows");
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return refused;
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ") && !absl::ConsumePrefix(&value, "bearer ")) return refused;
  std::optional<std::string> tenant = tokens_->Lookup(std::string_view(value.data(), value.size()));
  if (!tenant.has_value()) return refused;
  return *tenant;
}

absl::StatusOr<v1::GenerationOptions> InferenceService::ForTenant(const std::string& tenant,
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

grpc::Status InferenceService::Done(const char* method, grpc::Status status) {
  metrics_.RecordRequest(method, transport::StatusCodeLabel(ToAbslCode(status.error_code())));
  return status;
}

grpc::Status InferenceService::DoneForTenant(const char* method, const std::string& tenant, grpc::Status status) {
  metrics_.RecordTenantRequest(tenant, transport::StatusCodeLabel(ToAbslCode(status.error_code())));
  return Done(method, std::move(status));
}

grpc::Status InferenceService::RunPlan(const char* method, grpc::ServerContext& context, const std::string& tenant,
                                       GenerationRunner::Clock::time_point arrival,
                                       const absl::StatusOr<GenerationPlan>& plan, const GenerationRunner::Sink& sink) {
  if (!plan.ok()) return DoneForTenant(method, tenant, transport::ToGrpcStatus(plan.status()));
  const int64_t prompt_tokens = static_cast<int64_t>(plan->prompt.size());
  std::optional<TenantQuotas::Lease> lease;
  if (quotas_ != nullptr) {
    TenantQuotas::Admission admission = quotas_->Admit(tenant, prompt_tokens);
    if (!admission.lease.has_value()) {
      const std::string wait = std::to_string(admission.refusal.retry_after.count());
      // gRPC's own retry policy reads grpc-retry-pushback-ms; others read ours.
      context.AddTrailingMetadata("grpc-retry-pushback-ms", wait);
      context.AddTrailingMetadata("retry-after-ms", wait);
      metrics_.RecordQuotaRefusal(tenant, QuotaName(admission.refusal.kind));
      return DoneForTenant(method, tenant,
                           grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, admission.refusal.message));
    }
    lease = std::move(admission.lease);
  }
  int64_t generated = 0;
  const GenerationRunner::Sink counting = [&](const v1::GenerateTextResponse& r) {
    generated += r.token_ids_size();
    return sink(r);
  };
  grpc::Status status = runner_.Run(context, *plan, arrival, counting);
  if (lease.has_value()) lease->Finish(generated);
  metrics_.RecordTenantTokens(tenant, prompt_tokens, generated);
  return DoneForTenant(method, tenant, std::move(status));
}

grpc::Status InferenceService::Generate(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                                        grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  return Generating(
      "Generate", *context, *request,
      [this](const v1::GenerateTextRequest& r) { return PlanGenerate(model_, r, FreshSeed(), limits_); },
      [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
}

grpc::Status InferenceService::Chat(grpc::ServerContext* context, const v1::ChatRequest* request,
                                    grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  return Generating(
      "Chat", *context, *request, [this](const v1::ChatRequest& r) { return PlanChat(model_, r, FreshSeed(), limits_); },
      [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
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
  return Generating(
      "Complete", *context, *request,
      [this](const v1::GenerateTextRequest& r) { return PlanGenerate(model_, r, FreshSeed(), limits_); }, collect);
}

grpc::Status InferenceService::Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                                        v1::TokenizeResponse* response) {
  if (absl::Status s = Authenticate(*context).status(); !s.ok()) return Done("Tokenize", transport::ToGrpcStatus(s));
  if (absl::Status s = CheckModelName(model_, request->model()); !s.ok()) {
    return Done("Tokenize", transport::ToGrpcStatus(s));
  }
  absl::StatusOr<std::vector<model::TokenId>> ids = model_.tokenizer().Encode(
      request->text(), {.add_special = request->add_bos(), .parse_special = request->parse_special()});
  if (!ids.ok()) return Done("Tokenize", transport::ToGrpcStatus(ids.status()));
  response->mutable_token_ids()->Assign(ids->begin(), ids->end());
  return Done("Tokenize", grpc::Status::OK);
}

grpc::Status InferenceService::Detokenize(grpc::ServerContext* context, const v1::DetokenizeRequest* request,
                                          v1::DetokenizeResponse* response) {
  if (absl::Status s = Authenticate(*context).status(); !s.ok()) return Done("Detokenize", transport::ToGrpcStatus(s));
  if (absl::Status s = CheckModelName(model_, request->model()); !s.ok()) {
    return Done("Detokenize", transport::ToGrpcStatus(s));
  }
  const std::vector<model::TokenId> ids(request->token_ids().begin(), request->token_ids().end());
  if (absl::Status s = model_.CheckTokenIds(ids, "token_ids"); !s.ok()) {
    return Done("Detokenize", transport::ToGrpcStatus(s));
  }
  // Through the incremental detokenizer so the text is valid UTF-8 (a
  // proto string must be): a character cut off at the end becomes U+FFFD.
  model::IncrementalDetokenizer detokenizer(model_.tokenizer(), {.skip_special = request->skip_special()});
  std::string& text = *response->mutable_text();
  for (model::TokenId id : ids) {
    absl::StatusOr<std::string> piece = detokenizer.Push(id);
    if (!piece.ok()) return Done("Detokenize", transport::ToGrpcStatus(piece.status()));
    text += *piece;
  }
  text += detokenizer.Finish();
  return Done("Detokenize", grpc::Status::OK);
}

grpc::Status InferenceService::ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                                          v1::ListModelsResponse* response) {
  if (absl::Status s = Authenticate(*context).status(); !s.ok()) return Done("ListModels", transport::ToGrpcStatus(s));
  v1::ModelInfo& m = *response->add_models();
  m.set_id(model_.id());
  m.set_max_context(model_.context_length());
  m.set_vocab_size(model_.vocab_size());
  m.set_live_workers(pool_.Counts().routable);
  return Done("ListModels", grpc::Status::OK);
}

}  // namespace kvfleet::router
