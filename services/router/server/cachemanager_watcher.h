// Keeps the WorkerPool in step with the cachemanager's membership: on every
// (re)connection it lists the workers of the router's model (dropping those
// that left while it was not watching and no longer answer), then follows WatchWorkers: JOINED
// adds, DRAINING flags, LEFT removes and tells the placement to forget what
// it remembered sending there. When the cachemanager is down it retries with
// backoff; the pool keeps the workers it had, and the prober keeps judging
// them, so the router goes on serving: the cachemanager holds only soft
// state (docs/design.md, Overview).
//
// Thread-safety: Start and Stop from one thread; the callbacks run on the
// watcher's thread.
//
//   CacheManagerWatcher watcher(channel, "model", pool, [&](const std::string& id) { placement.Forget(id); });
//   watcher.Start();
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

class CacheManagerWatcher {
 public:
  using LeftCallback = std::function<void(const std::string& worker_id)>;

  CacheManagerWatcher(std::shared_ptr<grpc::Channel> channel, std::string model_id, WorkerPool& pool,
                      LeftCallback on_left);
  ~CacheManagerWatcher();  // stops
  CacheManagerWatcher(const CacheManagerWatcher&) = delete;
  CacheManagerWatcher& operator=(const CacheManagerWatcher&) = delete;

  void Start();
  void Stop();

  // True while a WatchWorkers stream is open.
  bool connected() const;

 private:
  void Run();
  // One connection: list, then watch until the stream breaks. False when
  // the listing failed.
  bool WatchOnce();
  void Apply(const v1::WorkerChange& change);

  const std::unique_ptr<v1::CacheManager::Stub> stub_;
  const std::string model_id_;
  WorkerPool& pool_;
  const LeftCallback on_left_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // to cancel on Stop
  std::thread thread_;
};

}  // namespace kvfleet::router
