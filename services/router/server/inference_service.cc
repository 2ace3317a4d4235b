#include "services/router/server/inference_service.h"

#include <random>

#include "model/tokenizer/incremental_detokenizer.h"
#include "services/transport/grpc_status.h"

namespace kvfleet::router {
namespace {

using Clock = GenerationRunner::Clock;

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
                                   RouterMetrics& metrics)
    : model_(model), runner_(runner), pool_(pool), metrics_(metrics) {}

grpc::Status InferenceService::Done(const char* method, grpc::Status status) {
  metrics_.RecordRequest(method, transport::StatusCodeLabel(ToAbslCode(status.error_code())));
  return status;
}

grpc::Status InferenceService::RunPlan(const char* method, grpc::ServerContext& context,
                                       GenerationRunner::Clock::time_point arrival,
                                       const absl::StatusOr<GenerationPlan>& plan, const GenerationRunner::Sink& sink) {
  if (!plan.ok()) return Done(method, transport::ToGrpcStatus(plan.status()));
  return Done(method, runner_.Run(context, *plan, arrival, sink));
}

grpc::Status InferenceService::Generate(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                                        grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  const auto arrival = Clock::now();
  return RunPlan("Generate", *context, arrival, PlanGenerate(model_, *request, FreshSeed()),
                 [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
}

grpc::Status InferenceService::Chat(grpc::ServerContext* context, const v1::ChatRequest* request,
                                    grpc::ServerWriter<v1::GenerateTextResponse>* writer) {
  const auto arrival = Clock::now();
  return RunPlan("Chat", *context, arrival, PlanChat(model_, *request, FreshSeed()),
                 [writer](const v1::GenerateTextResponse& r) { return writer->Write(r); });
}

grpc::Status InferenceService::Complete(grpc::ServerContext* context, const v1::GenerateTextRequest* request,
                                        v1::CompleteResponse* response) {
  const auto arrival = Clock::now();
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
  return RunPlan("Complete", *context, arrival, PlanGenerate(model_, *request, FreshSeed()), collect);
}

grpc::Status InferenceService::Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                                        v1::TokenizeResponse* response) {
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
  v1::ModelInfo& m = *response->add_models();
  m.set_id(model_.id());
  m.set_max_context(model_.context_length());
  m.set_vocab_size(model_.vocab_size());
  m.set_live_workers(pool_.Counts().routable);
  return Done("ListModels", grpc::Status::OK);
}

}  // namespace kvfleet::router
