// Failover through a real cluster: a worker SIGKILLed under 20 streams (each
// resumes on another worker with exactly the tokens an undisturbed run
// gives), a dead worker's requests retried elsewhere, full queues refused
// at once, and a cachemanager killed and restarted under load without a
// single failed request.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kStreams = 20;

// Runs `requests` concurrently, one thread each; `on_message` sees the
// partial result of stream i after each of its messages.
std::vector<TextStreamResult> RunConcurrently(const RouterCluster& cluster,
                                              const std::vector<v1::GenerateTextRequest>& requests,
                                              const std::function<void(size_t, const TextStreamResult&)>& on_message) {
  std::vector<TextStreamResult> results(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = cluster.Generate(requests[i], std::nullopt, [&, i](const TextStreamResult& partial) {
        if (on_message) on_message(i, partial);
        return false;
      });
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

double RouterCounter(const RouterCluster& cluster, const std::string& name) {
  absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? scrape->Sum(name) : -1;
}

TEST(RouterFailoverTest, AWorkerKilledUnderTwentyStreamsLosesNoTokenAndChangesNone) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 1}).ok());
  std::vector<v1::GenerateTextRequest> requests;
  for (int i = 0; i < kStreams; ++i) requests.push_back(TinyTextRequest(100 + i, 8 + i, 500));

  // The undisturbed run, on worker-0 alone.
  const std::vector<TextStreamResult> reference = RunConcurrently(cluster, requests, nullptr);
  for (const TextStreamResult& r : reference) ASSERT_TRUE(r.status.ok()) << r.status.error_message();

  // The same streams again; once each has tokens, a second worker joins and
  // the first is SIGKILLed under them.
  std::mutex mu;
  std::vector<size_t> tokens_seen(kStreams, 0);
  std::thread disturber([&] {
    ASSERT_TRUE(WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return std::all_of(tokens_seen.begin(), tokens_seen.end(), [](size_t n) { return n > 0; });
        },
        milliseconds(60000)));
    ASSERT_TRUE(cluster.StartWorker(1).ok());
    ASSERT_TRUE(cluster.WaitForLiveWorkers(2, milliseconds(20000)));
    cluster.KillWorker(0);
  });
  const std::vector<TextStreamResult> disturbed = RunConcurrently(cluster, requests, [&](size_t i, const auto& r) {
    std::lock_guard<std::mutex> lock(mu);
    tokens_seen[i] = r.tokens.size();
  });
  disturber.join();

  int resumed = 0;
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(disturbed[i].status.ok()) << disturbed[i].status.error_message();
    EXPECT_EQ(disturbed[i].tokens, reference[i].tokens);
    EXPECT_EQ(disturbed[i].text, reference[i].text);
    EXPECT_EQ(disturbed[i].usage.generated_tokens(), 500);
    EXPECT_EQ(disturbed[i].finish_reason, v1::FINISH_REASON_LENGTH);
    resumed += disturbed[i].worker_ids.back() == "worker-1";
  }
  std::printf("%d of %d streams resumed on worker-1 after the kill\n", resumed, kStreams);
  // The kill must have happened mid-stream for the test to mean anything.
  EXPECT_GT(resumed, 0) << "every stream finished before the kill: raise max_tokens";
  EXPECT_EQ(RouterCounter(cluster, "kvfleet_router_resumptions_total"), resumed);
}

TEST(RouterFailoverTest, RequestsToAKilledWorkerAreServedByTheOthers) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  cluster.KillWorker(0);
  // The router has not been told: it learns from the failed calls (or its probe).
  for (int i = 0; i < 8; ++i) {
    const TextStreamResult r = cluster.Generate(TinyTextRequest(200 + i, 10, 8));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.worker_ids.front(), "worker-1");
  }
}

TEST(RouterFailoverTest, WhenEveryQueueIsFullRequestsAreRefusedAtOnce) {
  RouterCluster cluster;
  ASSERT_TRUE(
      cluster.Start({.workers = 2, .worker_args = {"--max-num-seqs", "1", "--max-waiting-requests", "1"}}).ok());
  std::vector<v1::GenerateTextRequest> requests;
  for (int i = 0; i < 12; ++i) requests.push_back(TinyTextRequest(300 + i, 10, 1500));
  std::atomic<int> finished_ok{0};
  std::vector<int> ok_before(requests.size(), -1);  // requests finished OK when this one ended
  std::vector<TextStreamResult> results(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = cluster.Generate(requests[i]);
      if (results[i].status.ok()) {
        finished_ok++;
      } else {
        ok_before[i] = finished_ok.load();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int refused = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].status.ok()) {
      EXPECT_EQ(results[i].tokens.size(), 1500u);
      continue;
    }
    ++refused;
    EXPECT_EQ(results[i].status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << results[i].status.error_message();
    // Refused while the admitted ones were still generating: no waiting for room.
    EXPECT_EQ(ok_before[i], 0) << "a refusal came only after a request finished";
  }
  EXPECT_GE(refused, 1);
  EXPECT_GE(finished_ok.load(), 4);
}

TEST(RouterFailoverTest, ACacheManagerRestartUnderLoadFailsNoRequest) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        // A shared prefix per client, so placement has prefixes to look up.
        v1::GenerateTextRequest r = TinyTextRequest(400 + c, 40, 16);
        r.add_prompt_token_ids(5 + i % 50);
        const TextStreamResult result = cluster.Generate(r);
        if (result.status.ok() && result.tokens.size() == 16) {
          served++;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(result.status.error_message());
        }
      }
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return served.load() >= 20; }, milliseconds(60000)));
  cluster.KillCacheManager();
  const int served_at_kill = served.load();
  ASSERT_TRUE(WaitUntil([&] { return served.load() >= served_at_kill + 20; }, milliseconds(60000)))
      << "requests stopped being served while the cachemanager was down";
  ASSERT_TRUE(cluster.RestartCacheManager().ok());
  const int served_at_restart = served.load();
  ASSERT_TRUE(WaitUntil([&] { return served.load() >= served_at_restart + 20; }, milliseconds(60000)));
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, e.g. " << failures.front();
  EXPECT_GT(RouterCounter(cluster, "kvfleet_router_cachemanager_fallbacks_total"), 0);
  // The router is back on the index: both workers still routable.
  EXPECT_TRUE(cluster.WaitForLiveWorkers(2, milliseconds(10000)));
}

}  // namespace
}  // namespace kvfleet::testing
