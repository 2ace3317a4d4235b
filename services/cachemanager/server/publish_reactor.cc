#include "services/cachemanager/server/publish_reactor.h"

#include "common/logging.h"
#include "services/cachemanager/server/cachemanager_service.h"
#include "services/cachemanager/server/proto_convert.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::cachemanager {

PublishReactor::PublishReactor(CacheManagerService& service) : service_(service) { StartRead(&batch_); }

void PublishReactor::OnReadDone(bool ok) {
  if (!ok) {  // the worker closed its side, or the stream broke
    FinishOnce(grpc::Status::OK);
    return;
  }
  absl::StatusOr<KvEventBatch> batch = ToKvEventBatch(batch_);
  absl::StatusOr<ApplyResult> result = batch.ok() ? service_.Apply(*batch) : batch.status();
  if (!result.ok()) {
    KVFLEET_LOG_WARN("refused an event batch from worker '{}': {}", batch_.worker_id(), result.status().ToString());
    service_.metrics().RecordRejectedBatch(transport::StatusCodeLabel(result.status().code()));
    FinishOnce(transport::ToGrpcStatus(result.status()));
    return;
  }
  if (result->send_snapshot) {
    KVFLEET_LOG_INFO("asking worker '{}' for a snapshot: {}", batch_.worker_id(), result->reason);
    v1::PublisherCommand command;
    command.set_send_snapshot(true);
    command.set_reason(result->reason);
    QueueCommand(std::move(command));
  }
  StartRead(&batch_);
}

void PublishReactor::QueueCommand(v1::PublisherCommand command) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return;
    if (writing_) {
      commands_.push_back(std::move(command));
      return;
    }
    writing_ = true;
    in_flight_ = std::move(command);
  }
  StartWrite(&in_flight_);
}

void PublishReactor::OnWriteDone(bool ok) {
  enum class Next { kNothing, kWrite, kFinish } next = Next::kNothing;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (finish_ && !finished_) {
      finished_ = true;
      status = *finish_;
      next = Next::kFinish;
    } else if (ok && !commands_.empty()) {
      writing_ = true;
      in_flight_ = std::move(commands_.front());
      commands_.pop_front();
      next = Next::kWrite;
    }
    // A failed write means the stream broke: the pending read fails too and
    // its OnReadDone finishes the call.
  }
  if (next == Next::kWrite) StartWrite(&in_flight_);
  if (next == Next::kFinish) Finish(status);
}

void PublishReactor::FinishOnce(const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return;
    finish_ = status;
    if (writing_) return;  // OnWriteDone finishes
    finished_ = true;
  }
  Finish(status);
}

}  // namespace kvfleet::cachemanager
