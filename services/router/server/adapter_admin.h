// Loads and unloads a model's LoRA adapters on every worker of the model:
// the admin API (POST /v1/load_lora_adapter and /v1/unload_lora_adapter,
// and their gRPC twins). The calls go to the workers at once, in parallel;
// the answer says how many now serve it and how long that took.
//
// A call returns once the router's own view (the workers' next probe)
// shows the change, so a request sent right after the answer finds the
// adapter (or no longer does).
//
// What was asked is remembered per model, and every probe of a worker
// reconciles it (this is a WorkerObserver): a worker that joins later or
// restarts gets the adapters loaded, and one that still holds an unloaded
// name has it unloaded, so every worker of the model ends up with the same
// set. A worker whose load failed is asked again after retry_after.
// Adapters a worker loaded itself at start (--lora) and no admin changed
// are its own business.
//
// Thread-safety: every method is thread-safe.
//
//   AdapterAdmin admin(pool, {});
//   ASSIGN_OR_RETURN(AdapterChange c, admin.Load("Qwen2.5-0.5B", "sql", "/adapters/sql"));
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/router/server/model_admission.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

struct AdapterAdminOptions {
  std::chrono::milliseconds call_timeout{60000};  // one worker's load
  std::chrono::milliseconds retry_after{30000};   // after a worker's failed reconciling load
  // How long a call waits for the router's view of the workers (their next
  // probe) to show the change, so a request right after it finds it.
  std::chrono::milliseconds settle_timeout{3000};
};

struct AdapterChange {
  std::string name;
  std::string digest;  // what the workers read (Load); empty for Unload
  int32_t rank = 0;
  int32_t workers = 0;  // that serve it now (Load) or no longer (Unload)
  double seconds = 0;   // from the call to the last worker's answer
};

class AdapterAdmin : public WorkerObserver {
 public:
  AdapterAdmin(WorkerPool& pool, AdapterAdminOptions options);

  // On every routable worker of the model. INVALID_ARGUMENT or NOT_FOUND
  // as the workers answered when all refused (nothing is remembered);
  // UNAVAILABLE naming the workers that failed when some did (the others
  // serve it, and the failed ones are asked again on their probes), or
  // when the model has no routable worker.
  absl::StatusOr<AdapterChange> Load(const std::string& model_id, const std::string& name, const std::string& path);
  // NOT_FOUND when no worker of the model had it.
  absl::StatusOr<AdapterChange> Unload(const std::string& model_id, const std::string& name);

  void Observe(const std::string& worker_id, const v1::WorkerInfo& info, const v1::WorkerStats& stats,
               v1::Worker::StubInterface& stub) override;

 private:
  struct Wanted {
    std::map<std::string, std::string> loaded;  // name → path
    std::set<std::string> unloaded;
  };
  // One worker's answer to a load or unload.
  struct Answer {
    std::string worker_id;
    grpc::Status status;
    v1::LoraAdapterInfo info;
  };
  std::vector<Answer> CallAll(const std::vector<PooledWorker>& workers, const std::string& name,
                              const std::string* path) const;
  Answer Call(const std::string& worker_id, v1::Worker::StubInterface& stub, const std::string& name,
              const std::string* path) const;
  // Probes the workers now and waits (up to settle_timeout) until each of
  // `workers` reports `name` loaded (or, with !loaded, not).
  void Settle(const std::string& model_id, const std::vector<std::string>& workers, const std::string& name,
              bool loaded) const;

  WorkerPool& pool_;
  const AdapterAdminOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Wanted> wanted_ ABSL_GUARDED_BY(mu_);  // by model id
  // (worker, adapter) → when a reconciling load last failed.
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point> failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::router
