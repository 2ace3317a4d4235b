// A kvfleet cluster on this machine's loopback, as `kvfleet up` runs it: one
// cachemanager, N workers of each model registered with it, one router
// that finds the workers through it and learns each model from them.
//
// Owns the service processes (ChildProcess: each in its own process group,
// SIGKILLed with the object if still running) and knows their addresses and
// log files. Start() brings them up in dependency order and returns once
// every one has printed its ready line; Stop() takes them down in the
// reverse order (router, then workers, which drain, then the cachemanager).
// Invariants: after Start() succeeds every member has endpoints; members are
// never restarted. Thread-safety: none; one thread drives the cluster.
//
//   ASSIGN_OR_RETURN(auto cluster, LocalCluster::Start(options));
//   ... serve until told to stop, checking cluster->CheckRunning() ...
//   RETURN_IF_ERROR(cluster->Stop());
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"
#include "tools/cluster/service_binaries.h"
#include "tools/cluster/service_process.h"

namespace kvfleet::cluster {

// One running service of the cluster.
struct ClusterMember {
  std::string label;           // "cachemanager", "worker-0", "router": its name in messages and its log file's
  std::string program;         // "kvfleet-worker": the prefix of its stdout lines
  std::string log_path;        // its stderr
  ServiceEndpoints endpoints;  // set once it is ready
  std::unique_ptr<ChildProcess> process;  // null until started

  // "worker-0 (kvfleet-worker, pid 123)".
  std::string Describe() const;
};

struct LocalClusterOptions {
  ServiceBinaries binaries;
  // The models served (GGUF files or checkpoint directories), `workers`
  // workers each: worker-0 .. worker-(N-1) serve the first, the next N the
  // second, and so on. The router reads none of them.
  std::vector<std::string> models;
  int workers = 2;  // per model
  // Disaggregated prefill and decode: the first prefill_workers of each
  // model's workers run --role prefill and the others --role decode; 0:
  // every worker is of role both.
  int prefill_workers = 0;
  int threads_per_worker = 1;
  std::string kv_cache_memory = "512MiB";  // per worker, as kvfleet-worker's --kv-cache-memory
  std::string router_listen = "127.0.0.1:50060";
  std::string router_http_listen;  // the router's --http-listen (OpenAI-compatible API); empty: none
  std::string cachemanager_listen = "127.0.0.1:50050";
  int router_metrics_port = 9466;                    // 0 picks a free one; the other services always pick a free one
  std::string policy;                                // the router's --policy; empty: its default
  std::vector<std::string> cachemanager_extra_args;  // appended to the cachemanager's command line (TLS)
  std::vector<std::string> router_extra_args;        // appended to the router's command line (placement knobs)
  std::vector<std::string> worker_extra_args;        // appended to every worker's (speculation, scheduling)
  // A disk KV tier per worker: worker i's is kv_disk_dir/worker-<i> (its
  // size comes with worker_extra_args' --kv-disk-size). Empty: none.
  std::string kv_disk_dir;
  std::string log_dir;                              // must exist; a member's stderr goes to <log_dir>/<label>.log
  absl::Duration ready_timeout = absl::Minutes(2);  // per member, from its start to its ready line
  absl::Duration stop_timeout = absl::Seconds(45);  // per stage of Stop(), from SIGTERM to SIGKILL
  // Called as each member becomes ready (progress for a person watching).
  std::function<void(const ClusterMember&)> on_ready;
  // Asked about every 100 ms while Start() waits (must not block); true
  // abandons the start with CANCELLED (a Ctrl-C during start-up).
  std::function<bool()> interrupted;

  absl::Status Validate() const;
};

// One worker's share of the machine: hardware threads split evenly, at least one.
int DefaultThreadsPerWorker(int hardware_threads, int workers);

// The model worker `index` serves.
const std::string& WorkerModel(const LocalClusterOptions& options, int index);

// The command lines (argv[1..]) of the members; public for tests.
std::vector<std::string> CachemanagerArgs(const LocalClusterOptions& options);
std::vector<std::string> WorkerArgs(const LocalClusterOptions& options, int index,
                                    const std::string& cachemanager_address);
std::vector<std::string> RouterArgs(const LocalClusterOptions& options, const std::string& cachemanager_address);

class LocalCluster {
 public:
  // Starts the cachemanager, then every worker (in parallel), then the
  // router, waiting for each stage to be ready. Fails naming the member that
  // exited or timed out, with its log path and the log's last lines; the
  // members already started are stopped.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);

  // Stops whatever still runs (as Stop(), hurried by options.interrupted).
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  const ClusterMember& cachemanager() const { return cachemanager_; }
  const std::vector<ClusterMember>& workers() const { return workers_; }
  const ClusterMember& router() const { return router_; }

  // OK while every started member runs; otherwise names the first that
  // exited, with its exit code, log path and the log's last lines.
  absl::Status CheckRunning();

  // SIGTERMs the router, then all workers at once, then the cachemanager,
  // waiting up to stop_timeout for each stage before SIGKILLing what is left.
  // `hurry`, asked about every 20 ms while waiting (it must not block), cuts
  // the waits short: true SIGKILLs the rest at once (a second Ctrl-C). Fails
  // listing the members that had to be killed or exited with a non-zero
  // code. Members that exited before Stop() are CheckRunning()'s to report.
  // Idempotent.
  absl::Status Stop(const std::function<bool()>& hurry = nullptr);

 private:
  explicit LocalCluster(LocalClusterOptions options);

  // Starts `member` (label and program already set) with its log file.
  absl::Status Launch(ClusterMember& member, const std::string& binary, const std::vector<std::string>& args);
  absl::Status AwaitReady(ClusterMember& member, absl::Time deadline);

  const LocalClusterOptions options_;
  ClusterMember cachemanager_;
  std::vector<ClusterMember> workers_;
  ClusterMember router_;
};

}  // namespace kvfleet::cluster
