#include "services/worker/server/generate_reactor.h"

#include "absl/strings/str_cat.h"
#include "services/transport/grpc/grpc_status.h"
#include "services/worker/server/proto_convert.h"
#include "services/worker/server/worker_service.h"

namespace kvfleet::worker {

using transport::StatusCodeLabel;
using transport::ToGrpcStatus;

GenerateReactor::GenerateReactor(WorkerService& service, engine::Engine& engine, grpc::CallbackServerContext* call,
                                 const v1::GenerateRequest& request, RequestId id)
    : service_(service), engine_(engine), call_(call), id_(id) {
  absl::StatusOr<engine::EngineRequest> converted =
      ToEngineRequest(request, id_, service_.context_length(), service_.limits());
  if (!converted.ok()) {
    Refuse(converted.status());
    return;
  }
  if (!request.lora_adapter().empty()) {
    // Read here on first use from --lora-dir, on a gRPC thread, never on the engine's.
    if (service_.lora() == nullptr) {
      Refuse(
          absl::FailedPreconditionError(absl::StrCat("this worker serves no LoRA adapters (start it with "
                                                     "--max-loras N); adapter '",
                                                     request.lora_adapter().substr(0, 128), "' cannot run here")));
      return;
    }
    absl::StatusOr<std::shared_ptr<const model::LoraAdapter>> lora = service_.lora()->Find(request.lora_adapter());
    if (!lora.ok()) {
      Refuse(lora.status());
      return;
    }
    converted->lora = *std::move(lora);
  }
  if (request.has_constraint()) {
    // Compiled here, on a gRPC thread (cached per constraint), never on the engine's.
    if (service_.grammar() == nullptr) {
      Refuse(absl::FailedPreconditionError("this worker has no grammar compiler for structured output"));
      return;
    }
    absl::StatusOr<std::shared_ptr<engine::TokenConstraint>> constraint =
        service_.grammar()->NewConstraint(request.constraint());
    if (!constraint.ok()) {
      Refuse(constraint.status());
      return;
    }
    converted->constraint = *std::move(constraint);
  }
  // Once submitted, the engine may finish the request and gRPC delete this
  // reactor (and the request) before the constructor returns: only copies
  // and the parameters from here on.
  const v1::PlacementTicket placement = request.placement();
  const absl::Status status = engine.Submit(*std::move(converted), this);
  if (!status.ok()) {
    Refuse(status);
    return;
  }
  service.Admitted(placement);
  // A drain that gave up on running streams may have listed this one before
  // its Submit, when cancelling it had no effect yet.
  if (service.cancelling_all()) engine.Cancel(id);
}

GenerateReactor::~GenerateReactor() { service_.StreamEnded(id_); }

void GenerateReactor::Refuse(const absl::Status& status) {
  service_.metrics().RecordRejected(StatusCodeLabel(status.code()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine_done_ = true;  // never reached the engine
    finish_status_ = ToGrpcStatus(status);
    finish_started_ = true;
  }
  Finish(ToGrpcStatus(status));
}

void GenerateReactor::RecordTimings(const engine::RequestOutput& output, Clock::time_point now) {
  WorkerMetrics& metrics = service_.metrics();
  if (!output.new_tokens.empty()) {
    if (!seen_token_) {
      metrics.RecordFirstToken(std::chrono::duration<double>(now - arrival_).count());
    } else {
      // Tokens that arrive together split the gap evenly.
      const double gap = std::chrono::duration<double>(now - last_token_at_).count();
      for (size_t i = 0; i < output.new_tokens.size(); ++i) {
        metrics.RecordInterToken(gap / static_cast<double>(output.new_tokens.size()));
      }
    }
    seen_token_ = true;
    last_token_at_ = now;
  }
  if (output.finished) {
    metrics.RecordFinished(output.finish_reason, output.usage, std::chrono::duration<double>(now - arrival_).count(),
                           output.queue_seconds);
  }
}

void GenerateReactor::OnOutput(engine::RequestOutput output) {
  RecordTimings(output, Clock::now());
  Action action = Action::kNone;
  bool grpc_done = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!client_gone_) {
      AppendOutput(output, &pending_);
      has_pending_ = true;
    }
    if (output.finished) {
      engine_done_ = true;
      pending_is_final_ = true;
      if (!finish_status_) {
        switch (output.finish_reason) {
          case engine::FinishReason::kStop:
          case engine::FinishReason::kLength:
          case engine::FinishReason::kHandoff:
            finish_status_ = grpc::Status::OK;
            break;
          case engine::FinishReason::kCancelled:
            // Not the client's doing (that sets finish_status_ in OnCancel):
            // the worker shut down before the request could finish.
            finish_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          "the worker shut down before this request finished; retry it on another "
                                          "worker");
            has_pending_ = false;
            break;
          case engine::FinishReason::kError:
            finish_status_ = grpc::Status(grpc::StatusCode::INTERNAL,
                                          "the engine failed while running this request; see the worker's log");
            has_pending_ = false;
            break;
        }
      }
    }
    action = NextAction();
    grpc_done = grpc_done_;
  }
  if (output.finished && grpc_done) {
    // gRPC finished first (the client went away): this was the last use.
    delete this;
    return;
  }
  if (action != Action::kNone) Perform(action);
}

void GenerateReactor::OnWriteDone(bool ok) {
  Action action = Action::kNone;
  bool broken = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      // The stream broke under the write: nobody will read the rest.
      broken = !client_gone_;
      client_gone_ = true;
      has_pending_ = false;
      if (!finish_status_ || finish_status_->ok()) {
        finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke while writing");
      }
    }
    action = NextAction();
  }
  if (broken) engine_.Cancel(id_);  // before Perform: a Finish may end this reactor
  if (action != Action::kNone) Perform(action);
}

void GenerateReactor::OnCancel() {
  engine_.Cancel(id_);
  Action action = Action::kNone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    client_gone_ = true;
    has_pending_ = false;
    if (!finish_status_ || finish_status_->ok()) {
      const bool expired = call_->deadline() <= std::chrono::system_clock::now();
      finish_status_ = expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                              "the deadline passed before generation finished; the request was "
                                              "cancelled")
                               : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    }
    action = NextAction();
  }
  if (action != Action::kNone) Perform(action);
}

void GenerateReactor::OnDone() {
  bool engine_done = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    grpc_done_ = true;
    engine_done = engine_done_;
  }
  if (engine_done) delete this;
}

GenerateReactor::Action GenerateReactor::NextAction() {
  if (writing_ || finish_started_) return Action::kNone;
  if (has_pending_) {
    const bool last = pending_is_final_ && finish_status_ && finish_status_->ok();
    in_flight_.Clear();
    in_flight_.Swap(&pending_);
    has_pending_ = false;
    writing_ = true;
    if (last) finish_started_ = true;
    return last ? Action::kWriteAndFinish : Action::kWrite;
  }
  if (finish_status_ && (client_gone_ || engine_done_)) {
    finish_started_ = true;
    return Action::kFinish;
  }
  return Action::kNone;
}

void GenerateReactor::Perform(Action action) {
  switch (action) {
    case Action::kNone:
      return;
    case Action::kWrite:
      StartWrite(&in_flight_);
      return;
    case Action::kWriteAndFinish:
      StartWriteAndFinish(&in_flight_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    case Action::kFinish: {
      grpc::Status status;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status = *finish_status_;
      }
      Finish(status);
      return;
    }
  }
}

}  // namespace kvfleet::worker
