#include "services/router/server/cachemanager_watcher.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "common/logging.h"

namespace kvfleet::router {

CacheManagerWatcher::CacheManagerWatcher(std::shared_ptr<grpc::Channel> channel, std::string model_id, WorkerPool& pool,
                                         LeftCallback on_left)
    : stub_(v1::CacheManager::NewStub(std::move(channel))),
      model_id_(std::move(model_id)),
      pool_(pool),
      on_left_(std::move(on_left)) {}

CacheManagerWatcher::~CacheManagerWatcher() { Stop(); }

void CacheManagerWatcher::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void CacheManagerWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

bool CacheManagerWatcher::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

void CacheManagerWatcher::Run() {
  auto backoff = std::chrono::milliseconds(100);
  while (true) {
    const bool listed = WatchOnce();
    absl::MutexLock lock(&mu_);
    if (listed) backoff = std::chrono::milliseconds(100);
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::FromChrono(backoff))) return;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

bool CacheManagerWatcher::WatchOnce() {
  v1::ListWorkersRequest list_request;
  list_request.set_model_id(model_id_);
  v1::ListWorkersResponse listing;
  grpc::ClientContext list_context;
  list_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (grpc::Status s = stub_->ListWorkers(&list_context, list_request, &listing); !s.ok()) {
    KVFLEET_LOG_DEBUG("cachemanager ListWorkers failed: {}", s.error_message());
    return false;
  }
  absl::flat_hash_set<std::string> live;
  for (const v1::WorkerEntry& w : listing.workers()) live.insert(w.worker_id());
  for (const std::string& gone : pool_.RemoveUnreachableExcept(live)) on_left_(gone);
  for (const v1::WorkerEntry& w : listing.workers()) {
    pool_.Upsert(w.worker_id(), w.endpoint(), w.incarnation());
    if (w.load().draining()) pool_.SetDraining(w.worker_id());
  }

  grpc::ClientContext watch_context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return true;
    watch_context_ = &watch_context;
    connected_ = true;
  }
  KVFLEET_LOG_INFO("watching the cachemanager's workers ({} live)", listing.workers_size());
  v1::WatchWorkersRequest watch_request;
  watch_request.set_model_id(model_id_);
  std::unique_ptr<grpc::ClientReader<v1::WorkerChange>> reader = stub_->WatchWorkers(&watch_context, watch_request);
  v1::WorkerChange change;
  while (reader->Read(&change)) Apply(change);
  const grpc::Status status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    watch_context_ = nullptr;
    connected_ = false;
    if (!stopping_) KVFLEET_LOG_WARN("cachemanager watch ended ({}); reconnecting", status.error_message());
  }
  return true;
}

void CacheManagerWatcher::Apply(const v1::WorkerChange& change) {
  const v1::WorkerEntry& w = change.worker();
  switch (change.kind()) {
    case v1::WorkerChange::JOINED:
      pool_.Upsert(w.worker_id(), w.endpoint(), w.incarnation());
      if (w.load().draining()) pool_.SetDraining(w.worker_id());
      break;
    case v1::WorkerChange::DRAINING:
      pool_.SetDraining(w.worker_id());
      break;
    case v1::WorkerChange::LEFT:
      if (pool_.Remove(w.worker_id(), w.incarnation())) on_left_(w.worker_id());
      break;
    default:
      break;
  }
}

}  // namespace kvfleet::router
