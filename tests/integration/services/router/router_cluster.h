// A whole cluster on loopback for the router's integration tests: a real
// kvfleet-cachemanager, real kvfleet-worker processes registered with it
// (the harness's tiny model), and a real kvfleet-router in front, plus a
// client that records what a caller of the public API sees.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {

struct TextStreamResult {
  grpc::Status status;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<std::string> worker_ids;  // per message
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  int messages = 0;
};

struct RouterClusterOptions {
  int workers = 2;
  // Empty: the harness's tiny model, written for this cluster.
  std::string model_path;
  // Worker i serves this model instead (another model id: its file's name).
  std::map<int, std::string> model_path_of;
  // The router reads the model from model_path (--model) instead of
  // learning every model from its workers, as a router does by default.
  bool router_reads_model = false;
  std::vector<std::string> worker_args;                    // appended to every worker's command line
  std::map<int, std::vector<std::string>> worker_args_of;  // then to worker i's (its role, a fault)
  // A disk KV tier per worker of this size (empty: none), in a directory of
  // the cluster's that outlives the worker: a restarted worker finds it.
  std::string kv_disk_size;
  std::vector<std::string> router_args;        // appended to the router's
  std::vector<std::string> cachemanager_args;  // appended to the cachemanager's
  // The router gets the workers as a static --workers list instead of
  // watching the cachemanager (the workers still publish to it).
  bool static_workers = false;
  // Sent as `authorization: Bearer` by the harness's own calls (waiting for
  // the workers), for a router started with --auth-tokens.
  std::string bearer_token;
};

class RouterCluster {
 public:
  // Starts the cachemanager, the workers and the router, and waits until the
  // router sees every worker (ListModels live_workers).
  absl::Status Start(const RouterClusterOptions& options);

  // Another worker, "worker-<index>", registered with the cachemanager.
  absl::Status StartWorker(int index);
  WorkerHarness& worker(int index) { return *workers_.at(index); }
  // Worker `index`'s disk KV tier directory (options.kv_disk_size).
  std::string KvDiskDir(int index) const { return dir_.Path(absl::StrCat("kv-disk-worker-", index)); }
  int worker_count() const { return static_cast<int>(workers_.size()); }
  // SIGKILLs the worker and waits for it to die; the slot stays (null harness process).
  void KillWorker(int index);

  // SIGKILL, and (for Restart) a new cachemanager on the same address.
  void KillCacheManager();
  absl::Status RestartCacheManager();
  // The cachemanager's view of the workers (ListWorkers).
  absl::StatusOr<v1::ListWorkersResponse> CacheManagerWorkers() const;
  // SIGKILL, and (for Restart) a new router on the same address.
  void KillRouter();
  absl::Status RestartRouter();

  std::unique_ptr<v1::Inference::Stub> Stub() const;
  // The router's and worker `index`'s stderr (logs).
  std::string RouterLogPath() const { return dir_.Path("router.log"); }
  std::string WorkerLogPath(int index) const { return workers_.at(index)->LogPath(); }
  const std::string& router_address() const { return router_.address; }
  const std::string& cachemanager_address() const { return cachemanager_.address; }
  absl::StatusOr<PrometheusScrape> ScrapeRouter() const;
  absl::StatusOr<PrometheusScrape> ScrapeCacheManager() const;
  // live_workers of every base model together (ListModels lists the models
  // with live workers, and their LoRA adapters), per the router; -1 when
  // ListModels fails.
  int LiveWorkers() const;
  // The router's ListModels.
  absl::StatusOr<v1::ListModelsResponse> ListModels() const;
  bool WaitForLiveWorkers(int n, std::chrono::milliseconds timeout) const;

  // Streams one Generate call; `cancel_when` is asked after every message
  // and cancels the call once it returns true.
  TextStreamResult Generate(const v1::GenerateTextRequest& request,
                            std::optional<std::chrono::milliseconds> deadline = std::nullopt,
                            const std::function<bool(const TextStreamResult&)>& cancel_when = nullptr) const;
  TextStreamResult Chat(const v1::ChatRequest& request) const;

  const std::string& model_path() const { return model_path_; }

 private:
  absl::Status StartCacheManager(const std::string& listen);
  absl::Status StartRouter(const std::string& listen);

  RouterClusterOptions options_;
  TempDir dir_;
  std::string model_path_;
  StartedService cachemanager_;
  std::vector<std::unique_ptr<WorkerHarness>> workers_;
  StartedService router_;
};

// A Generate request for the tiny model: a random prompt of `prompt_tokens`
// ids (seeded), greedy, ignoring end-of-turn tokens, `max_tokens` tokens.
v1::GenerateTextRequest TinyTextRequest(uint64_t seed, int prompt_tokens, int max_tokens);

// Runs `requests` through the router concurrently, one thread each;
// `on_message` (may be empty) sees the partial result of stream i after
// each of its messages.
std::vector<TextStreamResult> RunConcurrently(const RouterCluster& cluster,
                                              const std::vector<v1::GenerateTextRequest>& requests,
                                              const std::function<void(size_t, const TextStreamResult&)>& on_message);

}  // namespace kvfleet::testing
