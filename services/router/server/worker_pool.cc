#include "services/router/server/worker_pool.h"

#include "common/logging.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::router {

bool WorkerPool::Entry::usable() const { return reachable && info.has_value() && !wrong_model; }

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)) {}

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
  e = Entry{.endpoint = endpoint,
            .incarnation = incarnation,
            .stub = options_.stub_factory
                        ? options_.stub_factory(endpoint)
                        : v1::Worker::NewStub(transport::CreateClientChannel(endpoint, options_.channel)),
            .generation = next_generation_++};
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
    workers_.erase(it++);
  }
  return removed;
}

void WorkerPool::ReportFailure(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  if (it->second.reachable) KVFLEET_LOG_WARN("worker {} unreachable: out of rotation until it answers", worker_id);
  it->second.reachable = false;
  ++it->second.failures;
  wake_ = true;
}

std::vector<PooledWorker> WorkerPool::Routable() const {
  absl::MutexLock lock(&mu_);
  std::vector<PooledWorker> out;
  out.reserve(workers_.size());
  for (const auto& [id, e] : workers_) {
    if (!e.usable()) continue;
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

int32_t WorkerPool::block_size() const {
  absl::MutexLock lock(&mu_);
  return block_size_;
}

WorkerPoolCounts WorkerPool::Counts() const {
  absl::MutexLock lock(&mu_);
  WorkerPoolCounts c;
  for (const auto& [id, e] : workers_) {
    ++c.known;
    const bool draining = e.draining || e.stats.draining();
    if (!e.usable()) {
      ++c.unreachable;
    } else if (draining) {
      ++c.draining;
    } else {
      ++c.routable;
    }
  }
  return c;
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
        targets.push_back({id, e.generation, e.failures, e.stub, !e.info.has_value()});
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
  v1::WorkerStats stats;
  if (status.ok()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.probe_timeout);
    status = target.stub->GetStats(&ctx, v1::GetStatsRequest(), &stats);
  }
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(target.worker_id);
  if (it == workers_.end() || it->second.generation != target.generation) return;  // replaced meanwhile
  Entry& e = it->second;
  if (status.ok() && e.failures != target.failures) return;  // a call failed since this probe began
  if (!status.ok()) {
    if (e.reachable) KVFLEET_LOG_WARN("worker {} probe failed: {}", target.worker_id, status.error_message());
    e.reachable = false;
    return;
  }
  if (info.has_value()) {
    if (info->model_id() != options_.model_id) {
      KVFLEET_LOG_ERROR("worker {} serves model {}, not {}: it gets no requests from this router", target.worker_id,
                        info->model_id(), options_.model_id);
      e.wrong_model = true;
    } else if (block_size_ == 0) {
      block_size_ = info->block_size();
    } else if (info->block_size() != block_size_) {
      KVFLEET_LOG_WARN("worker {} uses block size {}, the pool {}: its prefix hits will not be found", target.worker_id,
                       info->block_size(), block_size_);
    }
    e.info = std::move(info);
  }
  if (!e.reachable) KVFLEET_LOG_INFO("worker {} reachable", target.worker_id);
  e.reachable = true;
  e.stats = std::move(stats);
}

}  // namespace kvfleet::router
