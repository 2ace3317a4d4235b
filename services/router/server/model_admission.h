// What a worker pool asks before it routes to a worker: may this worker
// serve, given the model it reports? The router's answer is its model
// catalog (model_catalog.h), which learns each model from its first
// worker; tests that need no model leave it out and every worker that
// answers is admitted.
//
// Thread-safety: implementations are called from the pool's prober thread
// and from whichever thread removes a worker.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "kvfleet/v1/worker.grpc.pb.h"

namespace kvfleet::router {

class ModelAdmission {
 public:
  virtual ~ModelAdmission() = default;

  // OK once the worker's model (info.model_id, info.model_fingerprint) is
  // known, learning it through `stub` if need be (this may take a while:
  // the pool calls it without its lock); otherwise why the worker gets no
  // requests. The pool asks again each probe until it is OK.
  virtual absl::Status Admit(const std::string& worker_id, const v1::WorkerInfo& info,
                             v1::Worker::StubInterface& stub) = 0;
  // The worker left, or was replaced by a new incarnation: it no longer
  // holds its model's weights in the catalog's eyes.
  virtual void Release(const std::string& worker_id) = 0;
};

// Told of every probe of an admitted worker: its model and stats (the LoRA
// adapters it holds now), and its stub. Called on the pool's prober thread,
// without the pool's lock; a slow observer delays the next probes.
class WorkerObserver {
 public:
  virtual ~WorkerObserver() = default;
  virtual void Observe(const std::string& worker_id, const v1::WorkerInfo& info, const v1::WorkerStats& stats,
                       v1::Worker::StubInterface& stub) = 0;
};

}  // namespace kvfleet::router
