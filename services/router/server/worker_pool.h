// The workers this router may send requests to, each with its own channel
// (keepalive, from transport::CreateClientChannel), what GetInfo said about
// it (block size, batch limit, model) and its last GetStats.
//
// Membership comes from outside: the cachemanager watcher (Upsert on
// JOINED, SetDraining, Remove on LEFT) or the static --workers list. A
// prober thread calls GetInfo once per worker and GetStats on every worker
// each probe interval; a worker is routable only while its last probe (or
// call) succeeded, its model was admitted (model_admission.h: the router's
// model catalog learns the model, or refuses the worker, saying why), and
// it is not draining. A
// failed call (ReportFailure) takes it out of rotation at once; the next
// successful probe puts it back. So a SIGKILLed worker stops getting
// requests on the first failure, before the cachemanager's liveness
// deadline notices.
//
// Thread-safety: every method is thread-safe. Probes run without the lock.
//
//   WorkerPool pool({.admission = &catalog});
//   pool.Upsert("worker-0", "10.0.0.5:50051", /*incarnation=*/7);
//   pool.Start();
//   for (const PooledWorker& w : pool.Routable("SmolLM2-135M-Instruct")) ...
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/worker_role.h"
#include "kvfleet/v1/worker.grpc.pb.h"
#include "services/router/server/model_admission.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::router {

struct WorkerPoolOptions {
  // Asked before a worker is routable; null: every worker that answers is.
  ModelAdmission* admission = nullptr;
  // Told of each probe of an admitted worker, in order (may be empty).
  std::vector<WorkerObserver*> observers;
  std::chrono::milliseconds probe_interval{250};
  std::chrono::milliseconds probe_timeout{500};
  // A refused worker is asked again after the first, the wait doubling up
  // to the second: admission may fetch a model card, on the one prober thread.
  std::chrono::milliseconds admission_retry_first{1000};
  std::chrono::milliseconds admission_retry_most{30000};
  // Makes the stub for an endpoint; unset: a channel from
  // transport::CreateClientChannel. Tests put fake workers here.
  std::function<std::shared_ptr<v1::Worker::StubInterface>(const std::string& endpoint)> stub_factory;
  transport::ClientChannelOptions channel;  // TLS towards the workers
};

// One worker as the router sees it at a decision.
struct PooledWorker {
  std::string worker_id;
  std::string endpoint;
  std::shared_ptr<v1::Worker::StubInterface> stub;
  int32_t block_size = 0;
  int32_t max_num_seqs = 0;
  std::string numerics;                 // GetInfo's: a stream resumes only on a worker with the same
  std::string kv_transfer_endpoint;     // GetInfo's: where peers pull its KV blocks; empty: nowhere
  WorkerRole role = WorkerRole::kBoth;  // GetInfo's: which phases it takes
  v1::WorkerStats stats;                // the last probe's
  bool draining = false;
};

struct WorkerPoolCounts {
  int32_t known = 0;
  int32_t routable = 0;
  int32_t draining = 0;
  int32_t unreachable = 0;
};

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();  // stops the prober
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Start();
  // Adds an observer told of each probe of an admitted worker (after those
  // of the options); before Start only.
  void AddObserver(WorkerObserver* observer) { observers_.push_back(observer); }
  void Stop();

  // Adds a worker, or updates it; a new endpoint or incarnation gets a
  // fresh channel and a fresh GetInfo. Wakes the prober so a new worker is
  // routable within one probe round trip.
  void Upsert(const std::string& worker_id, const std::string& endpoint, uint64_t incarnation);
  // Probes every worker now rather than at the next interval (what they
  // serve just changed).
  void ProbeSoon();
  void SetDraining(const std::string& worker_id);
  // Removes the worker if `incarnation` is its current one (0 matches any),
  // so a LEFT for a replaced incarnation does not remove its successor.
  // True when removed.
  bool Remove(const std::string& worker_id, uint64_t incarnation);
  // Removes every worker that is not in `ids` and is not reachable now;
  // returns the removed ids. A reachable worker missing from a listing is
  // kept: a cachemanager that just restarted lists nobody until the workers
  // re-register, and dropping them would refuse clients for nothing.
  std::vector<std::string> RemoveUnreachableExcept(const absl::flat_hash_set<std::string>& ids);
  // A call to the worker failed in a way that says it is unreachable.
  void ReportFailure(const std::string& worker_id);

  // Workers of `model_id` that are reachable and admitted, draining ones
  // included (flagged) so the policy can count them; an empty id: of every
  // model.
  std::vector<PooledWorker> Routable(const std::string& model_id) const;
  // The block size the model's workers hash with (the first admitted one's);
  // 0 while none is.
  int32_t block_size(const std::string& model_id) const;
  // The model's workers (an empty id: every worker), known ones counted
  // whatever their model while GetInfo has not said it.
  WorkerPoolCounts Counts(const std::string& model_id = "") const;
  // The counts of every model with a known worker, by model id; workers
  // GetInfo has not described yet under "".
  std::map<std::string, WorkerPoolCounts> CountsByModel() const;

 private:
  struct Entry {
    std::string endpoint;
    uint64_t incarnation = 0;
    std::shared_ptr<v1::Worker::StubInterface> stub;
    std::optional<v1::WorkerInfo> info;
    v1::WorkerStats stats;
    bool reachable = false;
    bool draining = false;
    std::string refusal;  // why admission said no; empty: admitted (with info) or not asked yet
    // When a refused worker is asked again (WorkerPoolOptions::admission_retry_*).
    std::chrono::steady_clock::time_point next_admission{};
    std::chrono::milliseconds admission_backoff{0};
    // Unreachable since its admission: released, and re-described (GetInfo,
    // admission) when it answers again, in case it came back with other
    // weights at the same address.
    bool recheck = false;
    uint64_t generation = 0;  // bumped on every Upsert that replaces the channel
    uint64_t failures = 0;    // ReportFailure calls: a probe begun before one must not undo it

    // Reachable, described by GetInfo, and admitted.
    bool usable() const;
    bool Serves(const std::string& model_id) const {
      return model_id.empty() || (info && info->model_id() == model_id);
    }
    void CountInto(WorkerPoolCounts& c) const;
  };
  struct ProbeTarget {
    std::string worker_id;
    uint64_t generation;
    uint64_t failures;
    std::shared_ptr<v1::Worker::StubInterface> stub;
    bool needs_info;
  };

  void ProbeLoop();
  void ProbeOne(const ProbeTarget& target);
  // The admission's verdict on a worker GetInfo just described; OK without one.
  absl::Status Admit(const ProbeTarget& target, const v1::WorkerInfo& info) const;
  // What a probe learnt, into the worker's entry (if it is still the one probed).
  void Record(const ProbeTarget& target, std::optional<v1::WorkerInfo>& info, const absl::Status& admitted,
              const grpc::Status& status, v1::WorkerStats& stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the worker unreachable, releasing its admission once.
  void Unreachable(const std::string& worker_id, Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerPoolOptions options_;
  std::vector<WorkerObserver*> observers_;  // the options', then AddObserver's
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread prober_;
};

}  // namespace kvfleet::router
