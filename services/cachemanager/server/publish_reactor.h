// One worker's PublishEvents stream: reads event batches one at a time,
// applies each to the KV map, and writes a command back when the map wants
// a snapshot. A batch the map refuses (unknown worker, sequence not moving
// forward, malformed hashes) ends the stream with that status; the worker
// then registers again and starts over with a snapshot.
//
// Thread-safety: gRPC runs at most one read reaction and one write reaction
// at a time; state shared between them is under mu_. Deletes itself in OnDone.
#pragma once

#include <deque>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"

namespace kvfleet::cachemanager {

class CacheManagerService;

class PublishReactor final : public grpc::ServerBidiReactor<v1::EventBatch, v1::PublisherCommand> {
 public:
  explicit PublishReactor(CacheManagerService& service);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  // Finishes now, or once the write in flight completes.
  void FinishOnce(const grpc::Status& status);
  void QueueCommand(v1::PublisherCommand command);

  CacheManagerService& service_;
  v1::EventBatch batch_;  // the read in flight

  std::mutex mu_;
  std::deque<v1::PublisherCommand> commands_ ABSL_GUARDED_BY(mu_);
  v1::PublisherCommand in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvfleet::cachemanager
