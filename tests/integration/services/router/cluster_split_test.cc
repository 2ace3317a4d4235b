// Disaggregated prefill and decode through a real cluster (router,
// cachemanager, a prefill worker and two decode workers, over gRPC): a long
// prompt is prefilled on the prefill worker, a decode worker pulls its KV
// under the lease and continues, and the tokens are those of one worker
// doing everything (greedy and seeded); a short prompt goes straight to a
// decode worker. The chaos cases (docs/operations.md, "Faults the cluster
// survives"): the prefill worker killed during the decode worker's pull
// (the decode worker computes what it lacks), and the decode worker killed
// during its pull (the stream resumes on the other one); the tokens never
// change.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kPromptTokens = 256 + 5;  // 16 full blocks

double Value(WorkerHarness& w, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  absl::StatusOr<PrometheusScrape> scrape = w.ScrapeMetrics();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  if (!scrape.ok()) return -1;
  return labels.empty() ? scrape->Sum(name) : scrape->Value(name, labels).value_or(0);
}

double RouterValue(const RouterCluster& cluster, const std::string& name,
                   const std::map<std::string, std::string>& labels) {
  absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? scrape->Value(name, labels).value_or(0) : -1;
}

// worker-0 prefills, worker-1 and worker-2 decode; prompts with 64 or more
// uncached tokens are split. `prefill_args` go to the prefill worker only.
RouterClusterOptions SplitCluster(std::vector<std::string> prefill_args = {}) {
  RouterClusterOptions o{.workers = 3,
                         .worker_args = {"--kv-transfer-listen", "127.0.0.1:0", "--threads", "1"},
                         .router_args = {"--split-min-uncached-tokens", "64"}};
  prefill_args.insert(prefill_args.begin(), {"--role", "prefill"});
  o.worker_args_of = {{0, prefill_args}, {1, {"--role", "decode"}}, {2, {"--role", "decode"}}};
  return o;
}

v1::GenerateTextRequest Seeded(v1::GenerateTextRequest r, uint64_t seed) {
  r.mutable_options()->mutable_sampling()->set_temperature(0.9f);
  r.mutable_options()->mutable_sampling()->set_seed(seed);
  return r;
}

// The tokens of one worker of role both doing everything.
std::vector<std::vector<int32_t>> OneWorkerTokens(const std::vector<v1::GenerateTextRequest>& requests) {
  RouterCluster one;
  EXPECT_TRUE(one.Start({.workers = 1, .worker_args = {"--threads", "1"}}).ok());
  std::vector<std::vector<int32_t>> out;
  for (const v1::GenerateTextRequest& r : requests) {
    const TextStreamResult result = one.Generate(r);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    out.push_back(result.tokens);
  }
  return out;
}

TEST(ClusterSplitTest, ALongPromptIsPrefilledThereAndDecodedHereWithTheTokensOfOneWorker) {
  const std::vector<v1::GenerateTextRequest> requests = {TinyTextRequest(5151, kPromptTokens, 12),
                                                         Seeded(TinyTextRequest(5252, kPromptTokens, 12), 99),
                                                         TinyTextRequest(5353, 20, 12)};
  const std::vector<std::vector<int32_t>> reference = OneWorkerTokens(requests);
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(SplitCluster()).ok());
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    const TextStreamResult r = cluster.Generate(requests[i]);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens, reference[i]);
    ASSERT_FALSE(r.worker_ids.empty());
    if (i < 2) {
      EXPECT_EQ(r.worker_ids.front(), "worker-0") << "the prefill worker sends the first token";
      EXPECT_NE(r.worker_ids.back(), "worker-0") << "a decode worker sends the rest";
      EXPECT_EQ(r.usage.generated_tokens(), 12);
    } else {
      for (const std::string& w : r.worker_ids) EXPECT_NE(w, "worker-0") << "a short prompt is not split";
    }
  }
  EXPECT_EQ(RouterValue(cluster, "kvfleet_router_split_decisions_total",
                        {{"model", "tiny"}, {"decision", "split"}, {"reason", "long_uncached"}}),
            2);
  EXPECT_EQ(RouterValue(cluster, "kvfleet_router_split_decisions_total",
                        {{"model", "tiny"}, {"decision", "whole"}, {"reason", "short"}}),
            1);
  absl::StatusOr<PrometheusScrape> router = cluster.ScrapeRouter();
  ASSERT_TRUE(router.ok());
  EXPECT_EQ(router->Value("kvfleet_router_time_to_first_token_seconds_count", {{"model", "tiny"}, {"path", "split"}})
                .value_or(0),
            2);
  EXPECT_EQ(router->Value("kvfleet_router_time_to_first_token_seconds_count", {{"model", "tiny"}, {"path", "whole"}})
                .value_or(0),
            1);
  WorkerHarness& prefill = cluster.worker(0);
  EXPECT_EQ(Value(prefill, "kvfleet_worker_requests_total", {{"finish_reason", "handoff"}}), 2);
  EXPECT_EQ(Value(prefill, "kvfleet_worker_kv_leases_total", {{"outcome", "released"}}), 2);
  EXPECT_EQ(Value(prefill, "kvfleet_worker_kv_leased_blocks"), 0);
  EXPECT_EQ(Value(cluster.worker(1), "kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}) +
                Value(cluster.worker(2), "kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}),
            2 * 16)
      << "each split's 16 full prompt blocks pulled, none computed again";
}

// Chaos n: the prefill worker SIGKILLed while the decode worker pulls from
// it (the prefill worker holds every pull 3 s): the pull fails, the decode
// worker computes the prompt itself, the tokens are unchanged.
TEST(ClusterSplitTest, ChaosThePrefillWorkerKilledDuringThePullLeavesTheTokensUnchanged) {
  const v1::GenerateTextRequest request = Seeded(TinyTextRequest(5454, kPromptTokens, 12), 7);
  const std::vector<std::vector<int32_t>> reference = OneWorkerTokens({request});
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(SplitCluster({"--fault-kv-transfer", "stall"})).ok());
  // The client sees no token before the decode worker streams, so the
  // handoff is watched for at the prefill worker.
  std::atomic<bool> handed_off{false};
  std::thread killer([&] {
    handed_off = WaitUntil(
        [&] {
          return Value(cluster.worker(0), "kvfleet_worker_requests_total", {{"finish_reason", "handoff"}}) >= 1;
        },
        milliseconds(20000));
    std::this_thread::sleep_for(milliseconds(1000));  // inside the 3 s stall
    cluster.KillWorker(0);
  });
  const TextStreamResult r = cluster.Generate(request);
  killer.join();
  ASSERT_TRUE(handed_off) << "the prefill worker never handed off";
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, reference[0]);
  EXPECT_EQ(r.worker_ids.front(), "worker-0");
  const std::string decoder = r.worker_ids.back();
  WorkerHarness& d = cluster.worker(decoder == "worker-1" ? 1 : 2);
  EXPECT_EQ(Value(d, "kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}), 0);
  EXPECT_EQ(Value(d, "kvfleet_worker_kv_peer_pulls_total"), 1) << "one pull, fallen back to computing";
  std::printf(
      "chaos n: the prefill worker killed during the decode worker's pull: tokens unchanged, the %d-token "
      "prompt computed again on %s\n",
      kPromptTokens, decoder.c_str());
}

// Chaos o: the decode worker SIGKILLed while it pulls: the stream resumes
// on the other decode worker, which pulls the prompt from the prefill
// worker (the lease is gone with the first pull, the blocks still cached).
TEST(ClusterSplitTest, ChaosTheDecodeWorkerKilledDuringItsPullResumesOnTheOther) {
  const v1::GenerateTextRequest request = TinyTextRequest(5555, kPromptTokens, 12);
  const std::vector<std::vector<int32_t>> reference = OneWorkerTokens({request});
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start(SplitCluster({"--fault-kv-transfer", "stall"})).ok());
  std::atomic<int> killed{-1};
  std::thread killer([&] {
    // The decode worker holding the request waits on its pull.
    const bool found = WaitUntil(
        [&] {
          for (int w : {1, 2}) {
            absl::StatusOr<v1::WorkerStats> s = cluster.worker(w).Stats();
            if (s.ok() && s->running() + s->waiting() > 0) {
              killed = w;
              return true;
            }
          }
          return false;
        },
        milliseconds(20000));
    if (found) cluster.KillWorker(killed);
  });
  const TextStreamResult r = cluster.Generate(request);
  killer.join();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GE(killed.load(), 1) << "no decode worker was seen holding the request";
  EXPECT_EQ(r.tokens, reference[0]);
  const std::string survivor = killed == 1 ? "worker-2" : "worker-1";
  EXPECT_EQ(r.worker_ids.back(), survivor);
  EXPECT_GE(RouterValue(cluster, "kvfleet_router_resumptions_total", {{"model", "tiny"}}), 1);
  std::printf("chaos o: the decode worker (worker-%d) killed during its pull: resumed on %s, tokens unchanged\n",
              killed.load(), survivor.c_str());
}

}  // namespace
}  // namespace kvfleet::testing
