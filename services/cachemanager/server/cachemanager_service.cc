#include "services/cachemanager/server/cachemanager_service.h"

#include <algorithm>

#include "common/logging.h"
#include "services/cachemanager/server/proto_convert.h"
#include "services/cachemanager/server/publish_reactor.h"
#include "services/cachemanager/server/watch_reactor.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::cachemanager {

CacheManagerService::CacheManagerService(const CacheManagerOptions& options, CacheManagerMetrics& metrics)
    : options_(options), metrics_(metrics), map_({.liveness_deadline = options.liveness_deadline}) {}

CacheManagerService::~CacheManagerService() { StopSweeper(); }

void CacheManagerService::StartSweeper() { sweeper_ = std::thread([this] { SweepLoop(); }); }

void CacheManagerService::StopSweeper() {
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    stop_ = true;
  }
  sweep_wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void CacheManagerService::SweepLoop() {
  std::unique_lock<std::mutex> lock(sweep_mu_);
  while (!sweep_wake_.wait_for(lock, options_.sweep_interval, [this] { return stop_; })) {
    std::lock_guard<std::mutex> map_lock(mu_);
    const std::vector<MembershipChange> left = map_.Sweep(Clock::now());
    for (const MembershipChange& c : left) {
      KVFLEET_LOG_WARN("worker {} ({}) missed its liveness deadline; removed with {} indexed blocks",
                       c.worker.descriptor.worker_id, c.worker.descriptor.endpoint, c.worker.indexed_blocks);
    }
    Broadcast(left);
  }
}

void CacheManagerService::Broadcast(const std::vector<MembershipChange>& changes) {
  if (changes.empty()) return;
  std::lock_guard<std::mutex> lock(watchers_mu_);
  for (WatchReactor* w : watchers_) {
    for (const MembershipChange& c : changes) w->Push(c);
  }
}

void CacheManagerService::AddWatcher(WatchReactor* watcher) {
  std::lock_guard<std::mutex> map_lock(mu_);
  std::lock_guard<std::mutex> lock(watchers_mu_);
  for (const WorkerView& w : map_.List("")) watcher->Push({.kind = MembershipChange::Kind::kJoined, .worker = w});
  watchers_.push_back(watcher);
}

void CacheManagerService::RemoveWatcher(WatchReactor* watcher) {
  std::lock_guard<std::mutex> lock(watchers_mu_);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
}

absl::StatusOr<ApplyResult> CacheManagerService::Apply(const KvEventBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<ApplyResult> result = map_.Apply(batch, Clock::now());
  if (result.ok()) Broadcast(result->changes);
  return result;
}

grpc::ServerUnaryReactor* CacheManagerService::Register(grpc::CallbackServerContext* context,
                                                        const v1::RegisterRequest* request,
                                                        v1::RegisterResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<WorkerDescriptor> worker = ToDescriptor(*request);
  if (!worker.ok()) {
    reactor->Finish(transport::ToGrpcStatus(worker.status()));
    return reactor;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<std::vector<MembershipChange>> changes = map_.Register(*worker, Clock::now());
    if (!changes.ok()) {
      KVFLEET_LOG_WARN("{}", std::string(changes.status().message()));
      reactor->Finish(transport::ToGrpcStatus(changes.status()));
      return reactor;
    }
    Broadcast(*changes);
  }
  KVFLEET_LOG_INFO("worker {} registered: {} serving {} (incarnation {:x})", worker->worker_id, worker->endpoint,
                   worker->model_id, worker->incarnation);
  response->set_heartbeat_interval_ms(static_cast<int32_t>(options_.heartbeat_interval.count()));
  response->set_liveness_deadline_ms(static_cast<int32_t>(options_.liveness_deadline.count()));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::EventBatch, v1::PublisherCommand>* CacheManagerService::PublishEvents(
    grpc::CallbackServerContext* context) {
  return new PublishReactor(*this);
}

grpc::ServerUnaryReactor* CacheManagerService::FindOverlaps(grpc::CallbackServerContext* context,
                                                            const v1::FindOverlapsRequest* request,
                                                            v1::FindOverlapsResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<std::vector<BlockHash>> hashes = ParseHashes(request->block_hashes(), "block_hashes");
  if (!hashes.ok()) {
    reactor->Finish(transport::ToGrpcStatus(hashes.status()));
    return reactor;
  }
  std::vector<WorkerOverlapInfo> overlaps;
  {
    std::lock_guard<std::mutex> lock(mu_);
    overlaps = map_.FindOverlaps(request->model_id(), *hashes);
  }
  for (const WorkerOverlapInfo& o : overlaps) {
    v1::WorkerOverlap* out = response->add_workers();
    out->set_worker_id(o.worker.descriptor.worker_id);
    out->set_endpoint(o.worker.descriptor.endpoint);
    out->set_matched_blocks(o.matched_blocks);
    out->set_host_blocks(o.host_blocks);
    out->set_disk_blocks(o.disk_blocks);
    *out->mutable_load() = ToProto(o.worker.load);
  }
  metrics_.RecordFindOverlaps(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CacheManagerService::ListWorkers(grpc::CallbackServerContext* context,
                                                           const v1::ListWorkersRequest* request,
                                                           v1::ListWorkersResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<WorkerView> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers = map_.List(request->model_id());
  }
  const Clock::time_point now = Clock::now();
  for (const WorkerView& w : workers) *response->add_workers() = ToProto(w, now);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::WorkerChange>* CacheManagerService::WatchWorkers(grpc::CallbackServerContext* context,
                                                                              const v1::WatchWorkersRequest* request) {
  return new WatchReactor(*this, request->model_id());
}

}  // namespace kvfleet::cachemanager
