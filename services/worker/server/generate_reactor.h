// One Generate stream: the bridge between a gRPC server-streaming call and
// one engine request.
//
// The engine thread delivers outputs through OnOutput (the OutputSink);
// outputs are merged into one pending message while a write is in flight,
// so there is at most one write per stream and a slow client costs the
// engine nothing. Client cancellation and deadline expiry (OnCancel) cancel
// the engine request, whose blocks the engine frees at its next step.
//
// Lifetime: the reactor deletes itself when both gRPC is done with it
// (OnDone) and the engine is done with it (final output, or never
// submitted): whichever comes second deletes. Nothing touches `this` after
// handing gRPC a Finish.
//
// Thread-safety: OnOutput runs on the engine thread, the On* reactions on
// gRPC threads; shared state is under mu_, and gRPC calls are made outside it.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "kvfleet/v1/worker.grpc.pb.h"
#include "engine/engine.h"

namespace kvfleet::worker {

class WorkerService;

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>, public engine::OutputSink {
 public:
  // Converts, validates and submits the request; a refusal finishes the
  // call at once with a status naming the problem. The service has counted
  // the stream already (`id`); the destructor ends it.
  GenerateReactor(WorkerService& service, engine::Engine& engine, grpc::CallbackServerContext* call,
                  const v1::GenerateRequest& request, RequestId id);

  void OnOutput(engine::RequestOutput output) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  using Clock = std::chrono::steady_clock;
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish };

  ~GenerateReactor() override;
  void Refuse(const absl::Status& status);
  void RecordTimings(const engine::RequestOutput& output, Clock::time_point now);
  // Decides the next gRPC operation and marks it started.
  Action NextAction() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs an action decided under mu_, after releasing it. `this` may be
  // deleted by the time a Finish returns.
  void Perform(Action action);

  WorkerService& service_;
  engine::Engine& engine_;
  grpc::CallbackServerContext* call_;
  const RequestId id_;
  const Clock::time_point arrival_ = Clock::now();
  Clock::time_point last_token_at_;  // engine thread only
  bool seen_token_ = false;          // engine thread only

  std::mutex mu_;
  v1::GenerateResponse pending_ ABSL_GUARDED_BY(mu_);
  bool has_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_is_final_ ABSL_GUARDED_BY(mu_) = false;
  v1::GenerateResponse in_flight_;  // owned by gRPC while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);  // set once the end is known
  bool finish_started_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;
  bool grpc_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvfleet::worker
