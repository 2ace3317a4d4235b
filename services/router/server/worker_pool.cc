#include "services/router/server/worker_pool.h"

#include <algorithm>

#include "common/logging.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::router {

bool WorkerPool::Entry::usable() const { return reachable && info.has_value() && refusal.empty(); }

void WorkerPool::Entry::CountInto(WorkerPoolCounts& c) const {
  ++c.known;
  if (!usable()) {
    ++c.unreachable;
  } else if (draining || stats.draining()) {
    ++c.draining;
  } else {
    ++c.routable;
  }
}

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)), observers_(options_.observers) {}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start() {
  absl::MutexLock lock(&mu_);
  if (prober_.joinable()) return;
  stopping_ = false;
  prober_ = std::thread([this] { ProbeLoop(); });
}

void WorkerPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (prober_.joinable()) prober_.join();
}

void WorkerPool::Upsert(const std::string& worker_id, const std::string& endpoint, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  Entry& e = workers_[worker_id];
  if (e.stub != nullptr && e.endpoint == endpoint && e.incarnation == incarnation) return;
  KVFLEET_LOG_INFO("worker {} at {} joined the pool", worker_id, endpoint);
  if (e.stub != nullptr) Release(worker_id);  // a new incarnation is admitted afresh
  e = Entry{.endpoint = endpoint,
            .incarnation = incarnation,
            .stub = options_.stub_factory
                        ? options_.stub_factory(endpoint)
                        : v1::Worker::NewStub(transport::CreateClientChannel(endpoint, options_.channel)),
            .generation = next_generation_++};
  wake_ = true;
}

void WorkerPool::ProbeSoon() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void WorkerPool::SetDraining(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.draining = true;
}

bool WorkerPool::Remove(const std::string& worker_id, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || (incarnation != 0 && it->second.incarnation != incarnation)) return false;
  KVFLEET_LOG_INFO("worker {} left the pool", worker_id);
  Release(worker_id);
  workers_.erase(it);
  return true;
}

std::vector<std::string> WorkerPool::RemoveUnreachableExcept(const absl::flat_hash_set<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> removed;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (ids.contains(it->first) || it->second.reachable) {
      ++it;
      continue;
    }
    removed.push_back(it->first);
    Release(it->first);
    workers_.erase(it++);
  }
  return removed;
}

void WorkerPool::ReportFailure(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  if (it->second.reachable) KVFLEET_LOG_WARN("worker {} unreachable: out of rotation until it answers", worker_id);
  Unreachable(worker_id, it->second);
  ++it->second.failures;
  wake_ = true;
}

void WorkerPool::Unreachable(const std::string& worker_id, Entry& e) {
  e.reachable = false;
  if (e.info.has_value() && e.refusal.empty() && !e.recheck) {
    e.recheck = true;
    Release(worker_id);
  }
}

void WorkerPool::Release(const std::string& worker_id) const {
  if (options_.admission != nullptr) options_.admission->Release(worker_id);
}

std::vector<PooledWorker> WorkerPool::Routable(const std::string& model_id) const {
  absl::MutexLock lock(&mu_);
  std::vector<PooledWorker> out;
  out.reserve(workers_.size());
  for (const auto& [id, e] : workers_) {
    if (!e.usable() || !e.Serves(model_id)) continue;
    out.push_back({.worker_id = id,
                   .endpoint = e.endpoint,
                   .stub = e.stub,
                   .block_size = e.info->block_size(),
                   .max_num_seqs = e.info->max_num_seqs(),
                   .numerics = e.info->numerics(),
                   .kv_transfer_endpoint = e.info->kv_transfer_endpoint(),
                   .role = ParseWorkerRole(e.info->role()).value_or(WorkerRole::kBoth),
                   .stats = e.stats,
                   .draining = e.draining || e.stats.draining()});
  }
  return out;
}

int32_t WorkerPool::block_size(const std::string& model_id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : workers_) {
    if (e.info.has_value() && e.refusal.empty() && e.Serves(model_id)) return e.info->block_size();
  }
  return 0;
}

WorkerPoolCounts WorkerPool::Counts(const std::string& model_id) const {
  absl::MutexLock lock(&mu_);
  WorkerPoolCounts c;
  for (const auto& [id, e] : workers_) {
    if (e.info.has_value() && !e.Serves(model_id)) continue;
    e.CountInto(c);
  }
  return c;
}

std::map<std::string, WorkerPoolCounts> WorkerPool::CountsByModel() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, WorkerPoolCounts> out;
  for (const auto& [id, e] : workers_) {
    e.CountInto(out[e.info.has_value() ? e.info->model_id() : std::string()]);
  }
  return out;
}

void WorkerPool::ProbeLoop() {
  while (true) {
    std::vector<ProbeTarget> targets;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::FromChrono(options_.probe_interval));
      if (stopping_) return;
      wake_ = false;
      for (const auto& [id, e] : workers_) {
        // A refused worker is asked again (what refused it may have left), after its backoff.
        const bool refused_and_due = !e.refusal.empty() && std::chrono::steady_clock::now() >= e.next_admission;
        targets.push_back({id, e.generation, e.failures, e.stub, !e.info.has_value() || e.recheck || refused_and_due});
      }
    }
    for (const ProbeTarget& t : targets) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      ProbeOne(t);
    }
  }
}

void WorkerPool::ProbeOne(const ProbeTarget& target) {
  std::optional<v1::WorkerInfo> info;
  grpc::Status status;
  if (target.needs_info) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.probe_timeout);
    v1::WorkerInfo answer;
    status = target.stub->GetInfo(&ctx, v1::GetInfoRequest(), &answer);
    if (status.ok()) info = std::move(answer);
  }
  // Admission may fetch the model's card: before the lock.
  absl::Status admitted = info.has_value() ? Admit(target, *info) : absl::OkStatus();
  v1::WorkerStats stats;
  if (status.ok()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.probe_timeout);
    status = target.stub->GetStats(&ctx, v1::GetStatsRequest(), &stats);
  }
  // The observers hear of an admitted worker's stats before the stats make
  // it routable (a router knows a worker's adapters before it sends it
  // requests for them).
  std::optional<v1::WorkerInfo> admitted_model;
  if (status.ok() && !observers_.empty()) {
    if (info.has_value()) {
      if (admitted.ok()) admitted_model = info;
    } else {
      absl::MutexLock lock(&mu_);
      auto it = workers_.find(target.worker_id);
      if (it != workers_.end() && it->second.generation == target.generation && it->second.refusal.empty()) {
        admitted_model = it->second.info;
      }
    }
  }
  if (admitted_model.has_value()) {
    for (WorkerObserver* o : observers_) o->Observe(target.worker_id, *admitted_model, stats, *target.stub);
  }
  absl::MutexLock lock(&mu_);
  Record(target, info, admitted, status, stats);
}

void WorkerPool::Record(const ProbeTarget& target, std::optional<v1::WorkerInfo>& info, const absl::Status& admitted,
                        const grpc::Status& status, v1::WorkerStats& stats) {
  auto it = workers_.find(target.worker_id);
  if (it == workers_.end() || it->second.generation != target.generation) {
    // Removed or replaced meanwhile: what was just admitted holds nothing.
    if (info.has_value() && admitted.ok()) Release(target.worker_id);
    return;
  }
  Entry& e = it->second;
  if (status.ok() && e.failures != target.failures) return;  // a call failed since this probe began
  if (!status.ok()) {
    if (e.reachable) KVFLEET_LOG_WARN("worker {} probe failed: {}", target.worker_id, status.error_message());
    Unreachable(target.worker_id, e);
    return;
  }
  if (info.has_value()) {
    const std::string refusal(admitted.message());
    if (!admitted.ok() && refusal != e.refusal) {
      KVFLEET_LOG_ERROR("worker {} gets no requests from this router: {}", target.worker_id, refusal);
    } else if (admitted.ok() && !e.refusal.empty()) {
      KVFLEET_LOG_INFO("worker {} admitted: model {}", target.worker_id, info->model_id());
    }
    e.refusal = admitted.ok() ? std::string() : refusal;
    e.recheck = false;
    if (admitted.ok()) {
      e.admission_backoff = std::chrono::milliseconds(0);
    } else {
      e.admission_backoff =
          std::clamp(2 * e.admission_backoff, options_.admission_retry_first, options_.admission_retry_most);
      e.next_admission = std::chrono::steady_clock::now() + e.admission_backoff;
    }
    if (admitted.ok()) {
      for (const auto& [id, other] : workers_) {
        if (id == target.worker_id || !other.info.has_value() || !other.refusal.empty() ||
            other.info->model_id() != info->model_id() || other.info->block_size() == info->block_size()) {
          continue;
        }
        KVFLEET_LOG_WARN(
            "worker {} uses block size {}, worker {} of the same model {}: prefix hits between them "
            "will not be found",
            target.worker_id, info->block_size(), id, other.info->block_size());
        break;
      }
    }
    e.info = std::move(info);
  }
  if (!e.reachable) KVFLEET_LOG_INFO("worker {} reachable", target.worker_id);
  e.reachable = true;
  e.stats = std::move(stats);
}

absl::Status WorkerPool::Admit(const ProbeTarget& target, const v1::WorkerInfo& info) const {
  if (options_.admission == nullptr) return absl::OkStatus();
  return options_.admission->Admit(target.worker_id, info, *target.stub);
}

}  // namespace kvfleet::router
