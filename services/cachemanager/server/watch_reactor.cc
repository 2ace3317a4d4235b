#include "services/cachemanager/server/watch_reactor.h"

#include "services/cachemanager/server/cachemanager_service.h"
#include "services/cachemanager/server/proto_convert.h"

namespace kvfleet::cachemanager {

WatchReactor::WatchReactor(CacheManagerService& service, std::string model_id)
    : service_(service), model_id_(std::move(model_id)) {
  service_.AddWatcher(this);
}

void WatchReactor::Push(const MembershipChange& change) {
  if (!model_id_.empty() && change.worker.descriptor.model_id != model_id_) return;
  // StartWrite and Finish are called under mu_ so no write can start after
  // Finish (write reactions never run inline, so this cannot deadlock).
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  queue_.push_back(ToProto(change, Clock::now()));
  if (writing_) return;
  writing_ = true;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  StartWrite(&in_flight_);
}

void WatchReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok || finished_ || queue_.empty()) return;  // a failed write: OnCancel follows
  writing_ = true;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  StartWrite(&in_flight_);
}

void WatchReactor::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  Finish(grpc::Status::CANCELLED);  // allowed with a write outstanding: OnDone waits for it
}

void WatchReactor::OnDone() {
  service_.RemoveWatcher(this);
  delete this;
}

}  // namespace kvfleet::cachemanager
