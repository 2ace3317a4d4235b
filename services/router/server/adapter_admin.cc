#include "services/router/server/adapter_admin.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace kvfleet::router {

AdapterAdmin::AdapterAdmin(WorkerPool& pool, AdapterAdminOptions options) : pool_(pool), options_(options) {}

void AdapterAdmin::Settle(const std::string& model_id, const std::vector<std::string>& workers, const std::string& name,
                          bool loaded) const {
  pool_.ProbeSoon();
  const auto deadline = std::chrono::steady_clock::now() + options_.settle_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    size_t settled = 0;
    for (const PooledWorker& w : pool_.Routable(model_id)) {
      if (std::find(workers.begin(), workers.end(), w.worker_id) == workers.end()) continue;
      const bool has = std::any_of(w.stats.lora_adapters().begin(), w.stats.lora_adapters().end(),
                                   [&](const v1::LoraAdapterInfo& a) { return a.name() == name; });
      settled += has == loaded ? 1 : 0;
    }
    if (settled >= workers.size()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

AdapterAdmin::Answer AdapterAdmin::Call(const std::string& worker_id, v1::Worker::StubInterface& stub,
                                        const std::string& name, const std::string* path) const {
  Answer a{.worker_id = worker_id};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
  if (path != nullptr) {
    v1::LoadLoraAdapterRequest request;
    request.set_name(name);
    request.set_path(*path);
    a.status = stub.LoadLoraAdapter(&ctx, request, &a.info);
  } else {
    v1::UnloadLoraAdapterRequest request;
    request.set_name(name);
    v1::UnloadLoraAdapterResponse response;
    a.status = stub.UnloadLoraAdapter(&ctx, request, &response);
  }
  return a;
}

std::vector<AdapterAdmin::Answer> AdapterAdmin::CallAll(const std::vector<PooledWorker>& workers,
                                                        const std::string& name, const std::string* path) const {
  std::vector<Answer> answers(workers.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers.size(); ++i) {
    threads.emplace_back([&, i] { answers[i] = Call(workers[i].worker_id, *workers[i].stub, name, path); });
  }
  for (std::thread& t : threads) t.join();
  return answers;
}

absl::StatusOr<AdapterChange> AdapterAdmin::Load(const std::string& model_id, const std::string& name,
                                                 const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<PooledWorker> workers = pool_.Routable(model_id);
  if (workers.empty()) {
    return absl::UnavailableError(
        absl::StrCat("model ", model_id, " has no reachable worker to load '", name, "' on; start one and try again"));
  }
  const std::vector<Answer> answers = CallAll(workers, name, &path);
  AdapterChange change{.name = name};
  std::vector<std::string> failures, loaded_on;
  const grpc::Status* first_error = nullptr;
  for (const Answer& a : answers) {
    if (a.status.ok()) {
      ++change.workers;
      loaded_on.push_back(a.worker_id);
      change.digest = a.info.digest();
      change.rank = a.info.rank();
    } else {
      failures.push_back(absl::StrCat(a.worker_id, ": ", a.status.error_message()));
      if (first_error == nullptr) first_error = &a.status;
    }
  }
  if (change.workers > 0) Settle(model_id, loaded_on, name, /*loaded=*/true);
  change.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (change.workers == 0) {
    // Every worker refused the same files: a bad adapter, not a bad worker.
    return absl::Status(
        static_cast<absl::StatusCode>(first_error->error_code()),
        absl::StrCat("no worker of model ", model_id, " loaded '", name, "': ", first_error->error_message()));
  }
  {
    absl::MutexLock lock(&mu_);
    Wanted& w = wanted_[model_id];
    w.loaded[name] = path;
    w.unloaded.erase(name);
  }
  KVFLEET_LOG_INFO("LoRA adapter '{}' of model {} loaded on {} of {} workers in {:.3f} s", name, model_id,
                   change.workers, answers.size(), change.seconds);
  if (!failures.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "LoRA adapter '", name, "' loaded on ", change.workers, " of ", answers.size(), " workers of model ", model_id,
        "; the others are asked again on their probes: ", absl::StrJoin(failures, "; ")));
  }
  return change;
}

absl::StatusOr<AdapterChange> AdapterAdmin::Unload(const std::string& model_id, const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<PooledWorker> workers = pool_.Routable(model_id);
  {
    absl::MutexLock lock(&mu_);
    Wanted& w = wanted_[model_id];
    w.loaded.erase(name);
    w.unloaded.insert(name);
  }
  AdapterChange change{.name = name};
  std::vector<std::string> failures, unloaded_from;
  for (const Answer& a : CallAll(workers, name, nullptr)) {
    if (a.status.ok()) {
      ++change.workers;
      unloaded_from.push_back(a.worker_id);
    } else if (a.status.error_code() != grpc::StatusCode::NOT_FOUND) {
      failures.push_back(absl::StrCat(a.worker_id, ": ", a.status.error_message()));
    }
  }
  if (!unloaded_from.empty()) Settle(model_id, unloaded_from, name, /*loaded=*/false);
  change.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!failures.empty()) {
    return absl::UnavailableError(
        absl::StrCat("LoRA adapter '", name, "' unloaded on ", change.workers, " workers of model ", model_id,
                     "; the others are asked again on their probes: ", absl::StrJoin(failures, "; ")));
  }
  if (change.workers == 0) {
    return absl::NotFoundError(
        absl::StrCat("no worker of model ", model_id, " has a LoRA adapter named '", name, "' loaded"));
  }
  KVFLEET_LOG_INFO("LoRA adapter '{}' of model {} unloaded from {} workers in {:.3f} s", name, model_id, change.workers,
                   change.seconds);
  return change;
}

void AdapterAdmin::Observe(const std::string& worker_id, const v1::WorkerInfo& info, const v1::WorkerStats& stats,
                           v1::Worker::StubInterface& stub) {
  std::vector<std::pair<std::string, std::string>> to_load;  // name, path
  std::vector<std::string> to_unload;
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    auto it = wanted_.find(info.model_id());
    if (it == wanted_.end()) return;
    const auto has = [&](const std::string& name) {
      return std::any_of(stats.lora_adapters().begin(), stats.lora_adapters().end(),
                         [&](const v1::LoraAdapterInfo& a) { return a.name() == name; });
    };
    for (const auto& [name, path] : it->second.loaded) {
      if (has(name)) continue;
      auto failed = failed_.find({worker_id, name});
      if (failed != failed_.end() && now - failed->second < options_.retry_after) continue;
      to_load.emplace_back(name, path);
    }
    for (const std::string& name : it->second.unloaded) {
      if (has(name)) to_unload.push_back(name);
    }
  }
  for (const auto& [name, path] : to_load) {
    const Answer a = Call(worker_id, stub, name, &path);
    absl::MutexLock lock(&mu_);
    if (a.status.ok()) {
      failed_.erase({worker_id, name});
      KVFLEET_LOG_INFO("LoRA adapter '{}' loaded on worker {}, which lacked it", name, worker_id);
    } else {
      failed_[{worker_id, name}] = now;
      KVFLEET_LOG_WARN("LoRA adapter '{}' did not load on worker {}: {}", name, worker_id, a.status.error_message());
    }
  }
  for (const std::string& name : to_unload) {
    const Answer a = Call(worker_id, stub, name, nullptr);
    if (a.status.ok())
      KVFLEET_LOG_INFO("LoRA adapter '{}' unloaded from worker {}, which still had it", name, worker_id);
  }
}

}  // namespace kvfleet::router
