#include "tools/cluster/local_cluster.h"

#include <signal.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kvfleet::cluster {
namespace {

// Enough of a log to show why a service failed, short enough for a terminal.
constexpr size_t kLogTailBytes = 2048;
// How long a member SIGKILLed at the end of Stop() may take to be reaped.
constexpr absl::Duration kReapTimeout = absl::Seconds(5);
constexpr absl::Duration kStopPollInterval = absl::Milliseconds(20);

std::string LogExcerpt(const ClusterMember& member) {
  return absl::StrCat("log: ", member.log_path, "; its last lines:\n", LogTail(member.log_path, kLogTailBytes));
}

// Members of one stop stage: SIGTERMs them all, waits for each until the
// deadline or `hurry`, then SIGKILLs the rest. Appends what went wrong.
void StopStage(const std::vector<ClusterMember*>& stage, absl::Duration timeout, const std::function<bool()>& hurry,
               std::vector<std::string>& problems) {
  std::vector<ClusterMember*> running;
  for (ClusterMember* m : stage) {
    if (m->process != nullptr && m->process->Running()) running.push_back(m);
  }
  for (ClusterMember* m : running) m->process->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<ClusterMember*> left = running;
  while (!left.empty()) {
    std::erase_if(left, [](ClusterMember* m) { return !m->process->Running(); });
    if (left.empty()) break;
    const bool hurried = hurry && hurry();
    if (hurried || absl::Now() >= deadline) {
      for (ClusterMember* m : left) {
        m->process->Signal(SIGKILL);
        problems.push_back(absl::StrCat(m->Describe(),
                                        hurried ? " was killed (asked to hurry)" : " did not stop within ",
                                        hurried ? "" : absl::FormatDuration(timeout), "; log: ", m->log_path));
        (void)m->process->Wait(kReapTimeout);
      }
      return;
    }
    absl::SleepFor(kStopPollInterval);
  }
  for (ClusterMember* m : running) {
    const absl::StatusOr<int> code = m->process->Wait(absl::ZeroDuration());
    if (code.ok() && *code != 0) {
      problems.push_back(absl::StrCat(m->Describe(), " exited with code ", *code, " on SIGTERM; log: ", m->log_path));
    }
  }
}

}  // namespace

std::string ClusterMember::Describe() const {
  if (process == nullptr) return absl::StrCat(label, " (", program, ")");
  return absl::StrCat(label, " (", program, ", pid ", process->pid(), ")");
}

absl::Status LocalClusterOptions::Validate() const {
  if (binaries.cachemanager.empty() || binaries.worker.empty() || binaries.router.empty()) {
    return absl::InvalidArgumentError("the path of every service binary is required");
  }
  if (models.empty()) return absl::InvalidArgumentError("a model path is required");
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i].empty()) return absl::InvalidArgumentError("a model path is empty");
    if (std::find(models.begin(), models.begin() + static_cast<ptrdiff_t>(i), models[i]) !=
        models.begin() + static_cast<ptrdiff_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("model ", models[i],
                                                     " is given twice; --workers says how many "
                                                     "workers each model gets"));
    }
  }
  if (workers < 1) return absl::InvalidArgumentError(absl::StrCat("workers must be at least 1, got ", workers));
  if (prefill_workers < 0 || (prefill_workers > 0 && prefill_workers >= workers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill workers must leave at least one decode worker: ", prefill_workers, " of ", workers));
  }
  if (threads_per_worker < 1) {
    return absl::InvalidArgumentError(absl::StrCat("threads per worker must be at least 1, got ", threads_per_worker));
  }
  if (kv_cache_memory.empty()) return absl::InvalidArgumentError("the KV cache memory per worker is required");
  if (router_listen.empty() || cachemanager_listen.empty()) {
    return absl::InvalidArgumentError("the router and cachemanager listen addresses are required");
  }
  if (router_metrics_port < 0 || router_metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("router metrics port ", router_metrics_port, " is out of range"));
  }
  if (log_dir.empty()) return absl::InvalidArgumentError("a log directory is required");
  if (ready_timeout <= absl::ZeroDuration() || stop_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the ready and stop timeouts must be positive");
  }
  return absl::OkStatus();
}

int DefaultThreadsPerWorker(int hardware_threads, int workers) {
  return std::max(1, hardware_threads / std::max(1, workers));
}

std::vector<std::string> CachemanagerArgs(const LocalClusterOptions& options) {
  std::vector<std::string> args = {"--listen", options.cachemanager_listen, "--metrics-port", "0", "--metrics-host",
                                   "127.0.0.1"};
  args.insert(args.end(), options.cachemanager_extra_args.begin(), options.cachemanager_extra_args.end());
  return args;
}

const std::string& WorkerModel(const LocalClusterOptions& options, int index) {
  return options.models.at(static_cast<size_t>(index / options.workers));
}

std::vector<std::string> WorkerArgs(const LocalClusterOptions& options, int index,
                                    const std::string& cachemanager_address) {
  std::vector<std::string> args = {
      "--model", WorkerModel(options, index), "--worker-id", absl::StrCat("worker-", index), "--listen", "127.0.0.1:0",
      "--metrics-port", "0", "--metrics-host", "127.0.0.1", "--cachemanager", cachemanager_address, "--threads",
      absl::StrCat(options.threads_per_worker), "--kv-cache-memory", options.kv_cache_memory,
      // Peers pull each other's prefixes when the router's price says so.
      "--kv-transfer-listen", "127.0.0.1:0"};
  if (options.prefill_workers > 0) {
    args.push_back("--role");
    args.push_back(index % options.workers < options.prefill_workers ? "prefill" : "decode");
  }
  args.insert(args.end(), options.worker_extra_args.begin(), options.worker_extra_args.end());
  if (!options.kv_disk_dir.empty()) {
    args.push_back("--kv-disk-dir");
    args.push_back(absl::StrCat(options.kv_disk_dir, "/worker-", index));
  }
  return args;
}

std::vector<std::string> RouterArgs(const LocalClusterOptions& options, const std::string& cachemanager_address) {
  // No --model: the router learns each model from its workers.
  std::vector<std::string> args = {
      "--listen",       options.router_listen, "--metrics-port", absl::StrCat(options.router_metrics_port),
      "--metrics-host", "127.0.0.1",           "--cachemanager", cachemanager_address};
  if (!options.router_http_listen.empty()) {
    args.insert(args.end(), {"--http-listen", options.router_http_listen});
  }
  if (!options.policy.empty()) {
    args.push_back("--policy");
    args.push_back(options.policy);
  }
  args.insert(args.end(), options.router_extra_args.begin(), options.router_extra_args.end());
  return args;
}

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  cachemanager_.label = "cachemanager";
  cachemanager_.program = "kvfleet-cachemanager";
  workers_.resize(options_.models.size() * static_cast<size_t>(options_.workers));
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].label = absl::StrCat("worker-", i);
    workers_[i].program = "kvfleet-worker";
  }
  router_.label = "router";
  router_.program = "kvfleet-router";
}

LocalCluster::~LocalCluster() { (void)Stop(options_.interrupted); }

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(options));
  // On any failure below, `cluster` goes out of scope and stops what started.
  LocalCluster& c = *cluster;
  RETURN_IF_ERROR(c.Launch(c.cachemanager_, options.binaries.cachemanager, CachemanagerArgs(options)));
  RETURN_IF_ERROR(c.AwaitReady(c.cachemanager_, absl::Now() + options.ready_timeout));
  const std::string& cachemanager_address = c.cachemanager_.endpoints.grpc_address;
  for (size_t i = 0; i < c.workers_.size(); ++i) {
    RETURN_IF_ERROR(c.Launch(c.workers_[i], options.binaries.worker,
                             WorkerArgs(options, static_cast<int>(i), cachemanager_address)));
  }
  // The workers load their model side by side; one deadline covers them all.
  const absl::Time workers_deadline = absl::Now() + options.ready_timeout;
  for (ClusterMember& worker : c.workers_) RETURN_IF_ERROR(c.AwaitReady(worker, workers_deadline));
  RETURN_IF_ERROR(c.Launch(c.router_, options.binaries.router, RouterArgs(options, cachemanager_address)));
  RETURN_IF_ERROR(c.AwaitReady(c.router_, absl::Now() + options.ready_timeout));
  return cluster;
}

absl::Status LocalCluster::Launch(ClusterMember& member, const std::string& binary,
                                  const std::vector<std::string>& args) {
  member.log_path = absl::StrCat(options_.log_dir, "/", member.label, ".log");
  {
    // A fresh log that starts with the command line, so it can be rerun by hand.
    std::ofstream log(member.log_path, std::ios::trunc);
    if (!log) return absl::FailedPreconditionError(absl::StrCat("cannot write ", member.log_path));
    log << "# " << binary << " " << absl::StrJoin(args, " ") << "\n";
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(binary, args, member.log_path);
  if (!process.ok()) {
    return absl::Status(process.status().code(),
                        absl::StrCat("cannot start ", member.label, ": ", process.status().message()));
  }
  member.process = *std::move(process);
  return absl::OkStatus();
}

absl::Status LocalCluster::AwaitReady(ClusterMember& member, absl::Time deadline) {
  absl::StatusOr<ServiceEndpoints> endpoints =
      AwaitServiceReady(*member.process, member.program, deadline, options_.interrupted);
  if (absl::IsCancelled(endpoints.status())) return endpoints.status();
  if (!endpoints.ok()) {
    return absl::Status(endpoints.status().code(),
                        absl::StrCat(member.Describe(), " did not become ready: ", endpoints.status().message(), "\n",
                                     LogExcerpt(member)));
  }
  member.endpoints = *std::move(endpoints);
  if (options_.on_ready) options_.on_ready(member);
  return absl::OkStatus();
}

absl::Status LocalCluster::CheckRunning() {
  std::vector<ClusterMember*> members = {&cachemanager_, &router_};
  for (ClusterMember& w : workers_) members.push_back(&w);
  for (ClusterMember* m : members) {
    if (m->process == nullptr || m->process->Running()) continue;
    const absl::StatusOr<int> code = m->process->Wait(absl::ZeroDuration());
    return absl::UnavailableError(absl::StrCat(m->Describe(), " exited unexpectedly with code ",
                                               code.ok() ? absl::StrCat(*code) : "unknown", "; ", LogExcerpt(*m)));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::Stop(const std::function<bool()>& hurry) {
  std::vector<std::string> problems;
  std::vector<ClusterMember*> workers;
  for (ClusterMember& w : workers_) workers.push_back(&w);
  StopStage({&router_}, options_.stop_timeout, hurry, problems);
  StopStage(workers, options_.stop_timeout, hurry, problems);
  StopStage({&cachemanager_}, options_.stop_timeout, hurry, problems);
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("the cluster did not stop cleanly:\n  ", absl::StrJoin(problems, "\n  ")));
}

}  // namespace kvfleet::cluster
