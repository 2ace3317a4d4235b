// The worker's gRPC service (proto/kvfleet/v1/worker.proto), callback API.
//
// Before Attach() (the model is loading) and after BeginDrain(), Generate
// answers UNAVAILABLE so a router goes elsewhere. Each accepted Generate is
// a GenerateReactor that owns the stream; this class only counts and
// cancels them. GetInfo and GetStats answer inline from snapshots: no call
// ever waits for the engine thread.
//
// Thread-safety: all methods are thread-safe.
//
//   WorkerService service(metrics);
//   service.Attach(engine, info, card);  // now serving
//   service.BeginDrain(); ... service.CancelAll();
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "common/ids.h"
#include "engine/engine.h"
#include "kvfleet/v1/worker.grpc.pb.h"
#include "services/limits/request_limits.h"
#include "services/worker/grammar/grammar_compiler.h"
#include "services/worker/lora/lora_registry.h"
#include "services/worker/server/admitted_tickets.h"
#include "services/worker/server/model_card_stream.h"
#include "services/worker/server/worker_metrics.h"

namespace kvfleet::worker {

class WorkerService final : public v1::Worker::CallbackService {
 public:
  WorkerService(WorkerMetrics& metrics, const limits::RequestLimits& limits) : metrics_(metrics), limits_(limits) {}

  // The engine is running: Generate accepts requests, and DescribeModel
  // streams `card` (model_card_stream.h). `engine` must outlive every stream
  // (stop the gRPC server before destroying it).
  void Attach(engine::Engine& engine, v1::WorkerInfo info, std::shared_ptr<const ModelCardChunks> card);
  // New Generate calls get UNAVAILABLE; running streams continue.
  void BeginDrain();
  // Cancels every running stream; each ends UNAVAILABLE.
  void CancelAll();
  int64_t active_streams() const;
  bool draining() const { return draining_.load(); }
  bool cancelling_all() const { return cancelling_all_.load(); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context, const v1::GetInfoRequest* request,
                                    v1::WorkerInfo* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context, const v1::GetStatsRequest* request,
                                     v1::WorkerStats* response) override;
  grpc::ServerWriteReactor<v1::ModelDescriptionChunk>* DescribeModel(grpc::CallbackServerContext* context,
                                                                     const v1::DescribeModelRequest* request) override;

  // For GenerateReactor: a stream counted by Generate ends.
  void StreamEnded(RequestId id);
  WorkerMetrics& metrics() { return metrics_; }
  int64_t context_length() const { return info_.max_context(); }
  const limits::RequestLimits& limits() const { return limits_; }
  // A request was admitted by the engine: its router's ticket now counts
  // in the load this worker reports, and the report should go out now.
  void Admitted(const v1::PlacementTicket& placement);
  const AdmittedTickets& admitted() const { return admitted_; }
  // Called after each admission (the KV event publisher's wake-up); set
  // before Attach.
  void OnAdmission(std::function<void()> callback) { on_admission_ = std::move(callback); }
  // Compiles structured-output constraints; set before Attach (null: a
  // constrained request is refused).
  void SetGrammarCompiler(GrammarCompiler* compiler) { grammar_ = compiler; }
  GrammarCompiler* grammar() const { return grammar_; }
  // The adapters it serves; set before Attach (null: it serves none, and
  // a request naming one is refused).
  void SetLoraRegistry(LoraRegistry* registry) { lora_ = registry; }
  LoraRegistry* lora() const { return lora_; }

  grpc::ServerUnaryReactor* LoadLoraAdapter(grpc::CallbackServerContext* context,
                                            const v1::LoadLoraAdapterRequest* request,
                                            v1::LoraAdapterInfo* response) override;
  grpc::ServerUnaryReactor* UnloadLoraAdapter(grpc::CallbackServerContext* context,
                                              const v1::UnloadLoraAdapterRequest* request,
                                              v1::UnloadLoraAdapterResponse* response) override;

 private:
  grpc::ServerWriteReactor<v1::GenerateResponse>* Unavailable(const char* why);

  WorkerMetrics& metrics_;
  const limits::RequestLimits limits_;
  std::atomic<engine::Engine*> engine_{nullptr};
  v1::WorkerInfo info_;                          // written once, before engine_ is published
  std::shared_ptr<const ModelCardChunks> card_;  // likewise
  std::atomic<bool> draining_{false};
  std::atomic<bool> cancelling_all_{false};
  std::atomic<uint64_t> next_id_{1};
  AdmittedTickets admitted_;
  std::function<void()> on_admission_;
  GrammarCompiler* grammar_ = nullptr;
  LoraRegistry* lora_ = nullptr;

  mutable std::mutex mu_;
  absl::flat_hash_set<RequestId> active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::worker
