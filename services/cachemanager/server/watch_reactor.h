// One WatchWorkers stream: the current membership (as JOINED changes), then
// every change as the cachemanager makes it, in order, at most one write in
// flight. Changes queue while the client reads slowly.
//
// Thread-safety: Push is called by the service under its locks; the On*
// reactions run on gRPC threads; shared state is under mu_. On OnDone the
// reactor unregisters from the service (after which Push is never called
// again) and deletes itself.
#pragma once

#include <deque>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/cachemanager/index/kv_map.h"

namespace kvfleet::cachemanager {

class CacheManagerService;

class WatchReactor final : public grpc::ServerWriteReactor<v1::WorkerChange> {
 public:
  // `model_id` filters the changes; empty watches every model.
  WatchReactor(CacheManagerService& service, std::string model_id);

  void Push(const MembershipChange& change);
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  CacheManagerService& service_;
  const std::string model_id_;

  std::mutex mu_;
  std::deque<v1::WorkerChange> queue_ ABSL_GUARDED_BY(mu_);
  v1::WorkerChange in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvfleet::cachemanager
