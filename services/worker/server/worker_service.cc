#include "services/worker/server/worker_service.h"

#include <vector>

#include "common/logging.h"
#include "services/transport/grpc/grpc_status.h"
#include "services/worker/server/generate_reactor.h"
#include "services/worker/server/proto_convert.h"

namespace kvfleet::worker {
namespace {

// A stream that is over before it starts.
template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

v1::LoraAdapterInfo ToProto(const LoadedLora& loaded) {
  v1::LoraAdapterInfo out;
  out.set_name(loaded.adapter->name);
  out.set_digest(loaded.adapter->digest);
  out.set_rank(loaded.adapter->rank);
  out.set_path(loaded.path);
  out.set_load_seconds(loaded.load_seconds);
  return out;
}

}  // namespace

void WorkerService::Attach(engine::Engine& engine, v1::WorkerInfo info, std::shared_ptr<const ModelCardChunks> card) {
  info_ = std::move(info);
  card_ = std::move(card);
  engine_.store(&engine);  // publishes info_ and card_ too
}

grpc::ServerWriteReactor<v1::ModelDescriptionChunk>* WorkerService::DescribeModel(grpc::CallbackServerContext*,
                                                                                  const v1::DescribeModelRequest*) {
  if (engine_.load() == nullptr) {
    return new RefusedStream<v1::ModelDescriptionChunk>(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker is still loading its model"));
  }
  return new ModelCardStream(card_);
}

void WorkerService::BeginDrain() {
  // Under the lock Generate counts streams under: once this returns, every
  // stream that was let in is counted in active_streams(), so the drain
  // waits for it rather than the shutdown cutting it off.
  std::lock_guard<std::mutex> lock(mu_);
  draining_.store(true);
}

void WorkerService::CancelAll() {
  engine::Engine* engine = engine_.load();
  if (engine == nullptr) return;
  cancelling_all_.store(true);
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids.assign(active_.begin(), active_.end());
  }
  for (RequestId id : ids) engine->Cancel(id);
}

int64_t WorkerService::active_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(active_.size());
}

void WorkerService::StreamEnded(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.erase(id);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Unavailable(const char* why) {
  metrics_.RecordRejected("unavailable");
  return new RefusedStream<v1::GenerateResponse>(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(grpc::CallbackServerContext* context,
                                                                        const v1::GenerateRequest* request) {
  engine::Engine* engine = engine_.load();
  if (engine == nullptr) return Unavailable("the worker is still loading its model; retry shortly or elsewhere");
  const RequestId id(next_id_.fetch_add(1));
  bool let_in = false;
  {
    // The check and the count together (BeginDrain says why).
    std::lock_guard<std::mutex> lock(mu_);
    let_in = !draining_.load();
    if (let_in) active_.insert(id);
  }
  if (!let_in) return Unavailable("the worker is draining for shutdown; send the request elsewhere");
  if (!request->request_id().empty()) {
    KVFLEET_LOG_DEBUG("request {} is engine request {}", request->request_id(), id.value());
  }
  return new GenerateReactor(*this, *engine, context, *request, id);
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context, const v1::GetInfoRequest*,
                                                 v1::WorkerInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (engine_.load() == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker is still loading its model"));
    return reactor;
  }
  *response = info_;
  if (lora_ != nullptr) {
    for (const LoadedLora& loaded : lora_->List()) *response->add_lora_adapters() = ToProto(loaded);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::GetStats(grpc::CallbackServerContext* context, const v1::GetStatsRequest*,
                                                  v1::WorkerStats* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  engine::Engine* engine = engine_.load();
  if (engine == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker is still loading its model"));
    return reactor;
  }
  const std::vector<v1::PlacementTicket> admitted = admitted_.Snapshot();  // before the stats: see LoadOf
  const engine::EngineStats stats = engine->Stats();
  *response = ToProto(stats, info_.max_num_seqs(), LoadOf(stats, draining_.load(), admitted));
  if (lora_ != nullptr) {
    for (const LoadedLora& loaded : lora_->List()) *response->add_lora_adapters() = ToProto(loaded);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::LoadLoraAdapter(grpc::CallbackServerContext* context,
                                                         const v1::LoadLoraAdapterRequest* request,
                                                         v1::LoraAdapterInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (lora_ == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                 "this worker serves no LoRA adapters; start it with --max-loras N"));
    return reactor;
  }
  // Read on this gRPC thread; the engine sees the adapter only when a request names it.
  absl::StatusOr<LoadedLora> loaded = lora_->Load(request->name(), request->path());
  if (!loaded.ok()) {
    reactor->Finish(transport::ToGrpcStatus(loaded.status()));
    return reactor;
  }
  // Requests that come after it must not find the old weights resident.
  if (engine::Engine* engine = engine_.load()) engine->EvictLora(request->name());
  KVFLEET_LOG_INFO("LoRA adapter '{}' loaded from {} in {:.3f} s (rank {}, digest {})", request->name(),
                   request->path(), loaded->load_seconds, loaded->adapter->rank, loaded->adapter->digest.substr(0, 12));
  *response = ToProto(*loaded);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::UnloadLoraAdapter(grpc::CallbackServerContext* context,
                                                           const v1::UnloadLoraAdapterRequest* request,
                                                           v1::UnloadLoraAdapterResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Status unloaded =
      lora_ != nullptr ? lora_->Unload(request->name()) : absl::NotFoundError("this worker serves no LoRA adapters");
  if (unloaded.ok()) {
    if (engine::Engine* engine = engine_.load()) engine->EvictLora(request->name());
    KVFLEET_LOG_INFO("LoRA adapter '{}' unloaded", request->name());
  }
  reactor->Finish(transport::ToGrpcStatus(unloaded));
  return reactor;
}

void WorkerService::Admitted(const v1::PlacementTicket& placement) {
  admitted_.Record(placement);
  if (on_admission_) on_admission_();
}

}  // namespace kvfleet::worker
