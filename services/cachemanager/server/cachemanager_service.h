// The cachemanager's gRPC service (proto/kvfleet/v1/cachemanager.proto),
// callback API. One KvMap under one mutex holds the whole state; the gRPC
// layer only converts and forwards. Event streams (PublishReactor) and
// membership watches (WatchReactor) are reactors of their own.
//
// A sweeper thread removes workers that missed their liveness deadline and
// tells the watchers.
//
// Thread-safety: all methods are thread-safe. Lock order: mu_ before
// watchers_mu_.
//
//   CacheManagerService service({.liveness_deadline = 3s}, metrics);
//   service.StartSweeper();
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/cachemanager/index/kv_map.h"
#include "services/cachemanager/server/cachemanager_metrics.h"

namespace kvfleet::cachemanager {

class WatchReactor;

struct CacheManagerOptions {
  std::chrono::milliseconds liveness_deadline{3000};
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds sweep_interval{100};
};

class CacheManagerService final : public v1::CacheManager::CallbackService {
 public:
  CacheManagerService(const CacheManagerOptions& options, CacheManagerMetrics& metrics);
  ~CacheManagerService() override;

  void StartSweeper();
  void StopSweeper();

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerBidiReactor<v1::EventBatch, v1::PublisherCommand>* PublishEvents(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* FindOverlaps(grpc::CallbackServerContext* context, const v1::FindOverlapsRequest* request,
                                         v1::FindOverlapsResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context, const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerWriteReactor<v1::WorkerChange>* WatchWorkers(grpc::CallbackServerContext* context,
                                                           const v1::WatchWorkersRequest* request) override;

  // For the reactors.
  absl::StatusOr<ApplyResult> Apply(const KvEventBatch& batch);
  // Registers the watcher and hands it the current membership first, under
  // the same locks, so no change falls between the two.
  void AddWatcher(WatchReactor* watcher);
  void RemoveWatcher(WatchReactor* watcher);
  CacheManagerMetrics& metrics() { return metrics_; }

  // For the metrics collector: a consistent read of the map.
  template <typename F>
  auto Read(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    return f(map_);
  }

 private:
  void Broadcast(const std::vector<MembershipChange>& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLoop();

  const CacheManagerOptions options_;
  CacheManagerMetrics& metrics_;

  mutable std::mutex mu_;
  KvMap map_ ABSL_GUARDED_BY(mu_);
  std::mutex watchers_mu_;
  std::vector<WatchReactor*> watchers_ ABSL_GUARDED_BY(watchers_mu_);

  std::mutex sweep_mu_;
  std::condition_variable sweep_wake_;
  bool stop_ ABSL_GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;
};

}  // namespace kvfleet::cachemanager
