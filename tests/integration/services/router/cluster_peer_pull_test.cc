// Peer prefix fetch through a real cluster: the router's price sends a
// request to an idle worker with a hint to pull the prefix a busy worker
// holds, the idle worker copies it over the workers' KV transfer ports,
// and the tokens are those of computing it (also under a LoRA adapter,
// whose blocks hash under its identity); and the chaos case, the source
// SIGKILLed in the middle of the pull (docs/operations.md, "Faults the
// cluster survives"): the request computes the prefix instead, with the
// same tokens, and the stream that was on the dead worker resumes.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "model/lora/peft_adapter_writer.h"
#include "model/model.h"
#include "tests/integration/services/router/router_cluster.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

int WorkerIndex(const std::string& id) { return std::stoi(id.substr(std::string("worker-").size())); }

double WorkerValue(WorkerHarness& w, const std::string& name, const std::map<std::string, std::string>& labels) {
  absl::StatusOr<PrometheusScrape> scrape = w.ScrapeMetrics();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? scrape->Value(name, labels).value_or(0) : -1;
}

// With a guard margin of 0 the one stream on the holder puts it over the
// affinity guard, so the next request for its prefix goes to the idle
// worker, which pulls the prefix when the price says so.
RouterClusterOptions PullingCluster(std::vector<std::string> extra_worker_args = {}) {
  RouterClusterOptions o{.workers = 2,
                         .worker_args = {"--kv-transfer-listen", "127.0.0.1:0", "--threads", "1"},
                         .router_args = {"--affinity-guard-margin", "0"}};
  o.worker_args.insert(o.worker_args.end(), extra_worker_args.begin(), extra_worker_args.end());
  return o;
}

// Keeps one long stream with `prompt`'s prefix on the worker that holds it
// until release() (its reader blocks), then cancels it.
class HeldStream {
 public:
  HeldStream(const RouterCluster& cluster, v1::GenerateTextRequest prompt) {
    prompt.mutable_options()->mutable_stopping()->set_max_tokens(200);
    thread_ = std::thread([this, &cluster, prompt] {
      result_ = cluster.Generate(prompt, std::nullopt, [this](const TextStreamResult& partial) {
        if (!partial.worker_ids.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (first_worker_.empty()) first_worker_ = partial.worker_ids.front();
        }
        started_.store(true);
        while (!released_.load()) std::this_thread::sleep_for(milliseconds(10));
        return true;
      });
    });
    while (!started_.load()) std::this_thread::sleep_for(milliseconds(10));
  }
  ~HeldStream() { Release(); }
  void Release() {
    released_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::string first_worker() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_worker_;
  }

 private:
  std::thread thread_;
  std::atomic<bool> started_{false}, released_{false};
  std::mutex mu_;
  std::string first_worker_;
  TextStreamResult result_;
};

TEST(ClusterPeerPullTest, AnIdleWorkerPullsTheBusyHoldersPrefixWithTheSameTokens) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(PullingCluster()).ok());
  const v1::GenerateTextRequest prompt = TinyTextRequest(4242, 256 + 5, 8);  // 16 full blocks
  const TextStreamResult first = cluster.Generate(prompt);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const std::string holder = first.worker_ids.front();
  std::this_thread::sleep_for(milliseconds(300));  // its blocks reach the cachemanager
  HeldStream busy(cluster, prompt);
  ASSERT_EQ(busy.first_worker(), holder) << "the long stream follows the prefix";

  const TextStreamResult pulled = cluster.Generate(prompt);
  ASSERT_TRUE(pulled.status.ok()) << pulled.status.error_message();
  const std::string puller = pulled.worker_ids.front();
  EXPECT_NE(puller, holder);
  EXPECT_EQ(pulled.tokens, first.tokens);
  EXPECT_EQ(pulled.usage.cached_prompt_tokens(), 256) << "the pulled blocks were the request's prefix hit";
  WorkerHarness& p = cluster.worker(WorkerIndex(puller));
  EXPECT_EQ(WorkerValue(p, "kvfleet_worker_kv_peer_pulls_total", {{"outcome", "done"}}), 1);
  EXPECT_EQ(WorkerValue(p, "kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}), 16);
  EXPECT_EQ(WorkerValue(cluster.worker(WorkerIndex(holder)), "kvfleet_worker_kv_peer_blocks_total",
                        {{"direction", "served"}}),
            16);
  absl::StatusOr<PrometheusScrape> router = cluster.ScrapeRouter();
  ASSERT_TRUE(router.ok());
  EXPECT_EQ(
      router->Value("kvfleet_router_kv_pull_decisions_total", {{"model", "tiny"}, {"decision", "pull"}}).value_or(0),
      1);
  busy.Release();
}

TEST(ClusterPeerPullTest, APrefixComputedUnderALoraAdapterIsPulledAndUsedUnderItOnly) {
  // Both workers serve adapter sql; a request under it, pulled to the idle
  // worker, gets the holder's blocks of the same adapter and weights (the
  // hashes it names chain from the adapter's identity, and the handshake
  // names it: the holder must repeat it, or the pull is refused) and the
  // same tokens.
  TempDir dir;
  const std::string model_path = dir.Path("tiny.gguf");
  ASSERT_TRUE(WriteHarnessModel(model_path).ok());
  {
    auto model = model::Model::Load(model_path);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(model::WritePeftAdapter(tools::RandomLoraAdapter(**model, {.name = "sql", .rank = 4, .seed = 7}),
                                        dir.Path("sql"), {}, &(*model)->config())
                    .ok());
  }
  RouterClusterOptions options = PullingCluster({"--lora", "sql=" + dir.Path("sql"), "--max-loras", "2"});
  options.model_path = model_path;
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(options).ok());
  v1::GenerateTextRequest prompt = TinyTextRequest(4343, 256 + 5, 8);  // 16 full blocks
  prompt.mutable_options()->set_model("sql");
  const TextStreamResult first = cluster.Generate(prompt);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const std::string holder = first.worker_ids.front();
  std::this_thread::sleep_for(milliseconds(300));  // its blocks reach the cachemanager
  HeldStream busy(cluster, prompt);
  ASSERT_EQ(busy.first_worker(), holder) << "the long stream follows the adapter's prefix";

  const TextStreamResult pulled = cluster.Generate(prompt);
  ASSERT_TRUE(pulled.status.ok()) << pulled.status.error_message();
  const std::string puller = pulled.worker_ids.front();
  EXPECT_NE(puller, holder);
  EXPECT_EQ(pulled.tokens, first.tokens);
  EXPECT_EQ(pulled.usage.cached_prompt_tokens(), 256) << "the pulled blocks were the request's prefix hit";
  EXPECT_EQ(
      WorkerValue(cluster.worker(WorkerIndex(puller)), "kvfleet_worker_kv_peer_pulls_total", {{"outcome", "done"}}), 1);
  busy.Release();
  // The base model's request for the same prompt finds none of it.
  v1::GenerateTextRequest base = prompt;
  base.mutable_options()->clear_model();
  const TextStreamResult plain = cluster.Generate(base);
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_EQ(plain.usage.cached_prompt_tokens(), 0);
  EXPECT_NE(plain.tokens, first.tokens);
}

TEST(ClusterPeerPullTest, ChaosTheSourceKilledMidPullLeavesTheTokensUnchanged) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(PullingCluster({"--fault-kv-transfer", "stall"})).ok());
  const v1::GenerateTextRequest prompt = TinyTextRequest(4343, 256 + 5, 8);
  const TextStreamResult first = cluster.Generate(prompt);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const std::string holder = first.worker_ids.front();
  std::this_thread::sleep_for(milliseconds(300));
  HeldStream busy(cluster, prompt);
  ASSERT_EQ(busy.first_worker(), holder);

  // The source holds every pull 3 s: killed 1 s in, the puller's stream breaks.
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(1000));
    cluster.KillWorker(WorkerIndex(holder));
  });
  const TextStreamResult pulled = cluster.Generate(prompt);
  killer.join();
  ASSERT_TRUE(pulled.status.ok()) << pulled.status.error_message();
  const std::string puller = pulled.worker_ids.front();
  EXPECT_NE(puller, holder);
  EXPECT_EQ(pulled.tokens, first.tokens);
  WorkerHarness& p = cluster.worker(WorkerIndex(puller));
  EXPECT_EQ(WorkerValue(p, "kvfleet_worker_kv_peer_pulls_total", {{"outcome", "done"}}), 0);
  EXPECT_EQ(WorkerValue(p, "kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}), 0);
  absl::StatusOr<PrometheusScrape> scrape = p.ScrapeMetrics();
  ASSERT_TRUE(scrape.ok());
  EXPECT_EQ(scrape->Sum("kvfleet_worker_kv_peer_pulls_total"), 1) << "one pull, fallen back";
  std::printf("chaos k: the pull's source killed mid-pull: tokens unchanged, %d prompt tokens computed again\n",
              256 + 5 - pulled.usage.cached_prompt_tokens());
  busy.Release();
}

}  // namespace
}  // namespace kvfleet::testing
