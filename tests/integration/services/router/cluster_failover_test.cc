// The chaos and overload suite, through real router, cachemanager and worker
// processes on loopback (docs/operations.md, "Faults the cluster survives").
// Each case prints a line "chaos <letter>: ..." with its counts:
//   a. two of three workers SIGKILLed under 32 streams: no stream lost, no
//      token missing, duplicated or changed;
//   b. the cachemanager SIGKILLed and restarted under load: no request fails,
//      and the index re-converges to the workers' own block counts;
//   c. a worker SIGTERMed under load: no in-flight request fails and the
//      draining worker is sent nothing new;
//   d. twice the cluster's capacity at once: every request ends OK or
//      RESOURCE_EXHAUSTED within its deadline, and service is normal after;
//   e. 1,000 streams cancelled at random points: every worker's KV blocks
//      back to the idle baseline;
//   f. an event batch lost between a worker and the cachemanager: the index
//      ends exact;
//   g. the router restarted mid-load: clients see UNAVAILABLE, a retry works;
//   h. a killed worker restarted under the same id rejoins and is sent work;
//   i, j: the disk tier's cases, in cluster_disk_tier_chaos_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kStreams = 32;

double RouterCounter(const RouterCluster& cluster, const std::string& name) {
  absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? scrape->Sum(name) : -1;
}

// Case a.
// Whether, within `timeout`, the cachemanager's indexed block count for each
// of the first `workers` workers equals the worker's own cached blocks (an
// idle worker's blocks are all cached).
bool IndexMatchesWorkers(RouterCluster& cluster, int workers, milliseconds timeout) {
  std::string last;
  const bool matched = WaitUntil(
      [&] {
        absl::StatusOr<v1::ListWorkersResponse> index = cluster.CacheManagerWorkers();
        if (!index.ok()) return false;
        last.clear();
        bool all = true;
        for (int w = 0; w < workers; ++w) {
          absl::StatusOr<v1::WorkerStats> stats = cluster.worker(w).Stats();
          int64_t indexed = -1;
          for (const v1::WorkerEntry& e : index->workers()) {
            if (e.worker_id() == "worker-" + std::to_string(w)) indexed = e.indexed_blocks();
          }
          if (!stats.ok() || stats->blocks_used() != 0 || indexed != stats->blocks_cached()) all = false;
          last += " worker-" + std::to_string(w) + ": index " + std::to_string(indexed) + ", worker " +
                  (stats.ok() ? std::to_string(stats->blocks_cached()) : "?");
        }
        return all;
      },
      timeout);
  if (!matched) ADD_FAILURE() << "the index does not match the workers:" << last;
  return matched;
}

TEST(RouterFailoverTest, ChaosA_TwoOfThreeWorkersKilledUnderThirtyTwoStreamsLoseNoTokenAndChangeNone) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 3}).ok());
  std::vector<v1::GenerateTextRequest> requests;
  for (int i = 0; i < kStreams; ++i) requests.push_back(TinyTextRequest(100 + i, 8 + i, 600));

  // The undisturbed run.
  const std::vector<TextStreamResult> reference = RunConcurrently(cluster, requests, nullptr);
  for (const TextStreamResult& r : reference) ASSERT_TRUE(r.status.ok()) << r.status.error_message();

  // The same streams again; once each has tokens, the worker serving most
  // of them is SIGKILLed under them, then, once a stream has resumed, the
  // busiest of the other two. (Placement follows the prefixes the first run
  // cached, so which workers hold the streams is the router's choice.)
  std::mutex mu;
  std::vector<size_t> tokens_seen(kStreams, 0);
  std::vector<std::string> serving(kStreams);
  std::vector<int> killed;
  const auto busiest = [&] {
    std::lock_guard<std::mutex> lock(mu);
    int count[3] = {0, 0, 0};
    for (const std::string& w : serving) {
      if (w.size() == 8 && w.rfind("worker-", 0) == 0) count[w[7] - '0']++;
    }
    int best = -1;
    for (int w = 0; w < 3; ++w) {
      if (std::find(killed.begin(), killed.end(), w) == killed.end() && (best < 0 || count[w] > count[best])) best = w;
    }
    return best;
  };
  std::thread disturber([&] {
    ASSERT_TRUE(WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return std::all_of(tokens_seen.begin(), tokens_seen.end(), [](size_t n) { return n > 0; });
        },
        milliseconds(60000)));
    killed.push_back(busiest());
    cluster.KillWorker(killed.back());
    EXPECT_TRUE(WaitUntil([&] { return RouterCounter(cluster, "kvfleet_router_resumptions_total") >= 1; },
                          milliseconds(30000)));
    killed.push_back(busiest());
    cluster.KillWorker(killed.back());
  });
  const std::vector<TextStreamResult> disturbed = RunConcurrently(cluster, requests, [&](size_t i, const auto& r) {
    std::lock_guard<std::mutex> lock(mu);
    tokens_seen[i] = r.tokens.size();
    serving[i] = r.worker_ids.back();
  });
  disturber.join();

  int lost = 0, changed = 0, moved = 0;
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(disturbed[i].status.ok()) << disturbed[i].status.error_message();
    lost += !disturbed[i].status.ok();
    changed += disturbed[i].tokens != reference[i].tokens || disturbed[i].text != reference[i].text;
    EXPECT_EQ(disturbed[i].usage.generated_tokens(), 600);
    EXPECT_EQ(disturbed[i].finish_reason, v1::FINISH_REASON_LENGTH);
    moved += disturbed[i].worker_ids.front() != disturbed[i].worker_ids.back();
  }
  const double resumptions = RouterCounter(cluster, "kvfleet_router_resumptions_total");
  std::printf(
      "chaos a: %d streams, 2 of 3 workers killed; %d lost, %d with a token missing, duplicated or changed, "
      "%d served by more than one worker, %.0f resumptions\n",
      kStreams, lost, changed, moved, resumptions);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(changed, 0);
  // The kills must have happened mid-stream for the test to mean anything.
  EXPECT_GT(moved, 0) << "every stream finished before the kills: raise max_tokens";
  ASSERT_EQ(killed.size(), 2u);
  const std::string survivor = "worker-" + std::to_string(3 - killed[0] - killed[1]);
  EXPECT_TRUE(std::all_of(disturbed.begin(), disturbed.end(),
                          [&](const TextStreamResult& r) { return r.worker_ids.back() == survivor; }))
      << "every stream ends on the one worker left, " << survivor;
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

// Case d: with one running slot and one queue place per worker, 12 requests
// are three times what the cluster holds.
TEST(RouterFailoverTest, ChaosD_OverloadEndsEveryRequestOkOrResourceExhaustedInTimeAndServiceRecovers) {
  RouterCluster cluster;
  ASSERT_TRUE(
      cluster.Start({.workers = 2, .worker_args = {"--max-num-seqs", "1", "--max-waiting-requests", "1"}}).ok());
  std::vector<v1::GenerateTextRequest> requests;
  for (int i = 0; i < 12; ++i) requests.push_back(TinyTextRequest(300 + i, 10, 1500));
  std::atomic<int> finished_ok{0};
  std::vector<int> ok_before(requests.size(), -1);  // requests finished OK when this one ended
  std::vector<TextStreamResult> results(requests.size());
  std::vector<std::thread> threads;
  const auto deadline = milliseconds(120000);
  std::vector<milliseconds> took(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      const auto start = std::chrono::steady_clock::now();
      results[i] = cluster.Generate(requests[i], deadline);
      took[i] = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
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
  for (const milliseconds t : took) EXPECT_LT(t, deadline) << "none hangs to its deadline";
  // Right after the burst the cluster serves normally.
  int after_ok = 0;
  for (int i = 0; i < 4; ++i) after_ok += cluster.Generate(TinyTextRequest(350 + i, 10, 8)).status.ok();
  EXPECT_EQ(after_ok, 4);
  std::printf(
      "chaos d: %zu requests on room for 4 running and 4 waiting: %d ok, %d resource_exhausted, 0 hung; "
      "%d of 4 ok right after\n",
      requests.size(), finished_ok.load(), refused, after_ok);
}

// Case b.
TEST(RouterFailoverTest, ChaosB_ACacheManagerRestartUnderLoadFailsNoRequestAndTheIndexReconverges) {
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
  // Idle now, so each worker's hashed blocks are its cached ones: the index
  // holds exactly those.
  const auto load_stopped = std::chrono::steady_clock::now();
  EXPECT_TRUE(IndexMatchesWorkers(cluster, 2, milliseconds(10000)));
  const double converged = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_stopped).count();
  std::printf(
      "chaos b: %d requests served across a cachemanager kill and restart, %zu failed; the index matched "
      "every worker's block count %.2f s after the load stopped\n",
      served.load(), failures.size(), converged);
}

// Case c: SIGTERM drains a worker; the router stops sending it work as soon
// as it reports draining, and its in-flight streams finish.
TEST(RouterFailoverTest, ChaosC_ADrainingWorkerFinishesItsStreamsAndIsSentNothingNew) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2, .worker_args = {"--drain-timeout", "60"}}).ok());
  std::atomic<bool> stop{false};
  std::atomic<bool> terminated{false};
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> served{0}, after_drain_on_it{0}, after_drain{0};
  std::vector<std::thread> clients;
  std::atomic<int64_t> drain_noticed_ns{0};
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        const auto started = std::chrono::steady_clock::now().time_since_epoch().count();
        const TextStreamResult r = cluster.Generate(TinyTextRequest(500 + c * 100 + i, 12, 200));
        if (!r.status.ok() || r.tokens.size() != 200) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(r.status.error_message());
          continue;
        }
        served++;
        const int64_t noticed = drain_noticed_ns.load();
        if (noticed != 0 && started > noticed) {
          after_drain++;
          after_drain_on_it += r.worker_ids.front() == "worker-0";
        }
      }
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return served.load() >= 12; }, milliseconds(60000)));
  ASSERT_TRUE(cluster.worker(0).Stats().ok());
  cluster.worker(0).worker().process().Signal(SIGTERM);
  terminated = true;
  // The router's view turns within one probe or load report.
  ASSERT_TRUE(WaitUntil([&] { return cluster.LiveWorkers() == 1; }, milliseconds(10000)));
  drain_noticed_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  const int at_notice = served.load();
  ASSERT_TRUE(WaitUntil([&] { return served.load() >= at_notice + 12; }, milliseconds(60000)));
  stop = true;
  for (std::thread& t : clients) t.join();
  absl::StatusOr<int> exit_code = cluster.worker(0).worker().process().Wait(absl::Seconds(60));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  std::printf(
      "chaos c: %d requests, %zu failed across a SIGTERM; %d started after the drain was seen, %d of them "
      "on the draining worker; it exited %d\n",
      served.load(), failures.size(), after_drain.load(), after_drain_on_it.load(), *exit_code);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, e.g. " << failures.front();
  EXPECT_EQ(after_drain_on_it.load(), 0);
  EXPECT_GT(after_drain.load(), 0);
  EXPECT_EQ(*exit_code, 0);
}

// Case e.
TEST(RouterFailoverTest, ChaosE_AThousandStreamsCancelledAtRandomPointsLeaveNoBlockInUse) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  constexpr int kCancelled = 1000, kAtOnce = 50;
  std::atomic<int> cancelled{0}, finished{0}, other{0};
  for (int wave = 0; wave < kCancelled / kAtOnce; ++wave) {
    std::vector<std::thread> threads;
    for (int i = 0; i < kAtOnce; ++i) {
      threads.emplace_back([&, wave, i] {
        const int n = wave * kAtOnce + i;
        // Cancel before the first message for some, after 1 to 20 for the rest.
        const int after = n % 7 == 0 ? 0 : 1 + n % 20;
        const TextStreamResult r =
            cluster.Generate(TinyTextRequest(1000 + n, 8 + n % 40, 400), std::nullopt,
                             [after](const TextStreamResult& partial) { return partial.messages >= after; });
        if (r.status.error_code() == grpc::StatusCode::CANCELLED) {
          cancelled++;
        } else if (r.status.ok()) {
          finished++;
        } else {
          other++;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  int used[2] = {-1, -1};
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (int w = 0; w < 2; ++w) {
          absl::StatusOr<v1::WorkerStats> s = cluster.worker(w).Stats();
          used[w] = s.ok() ? s->blocks_used() : -1;
        }
        return used[0] == 0 && used[1] == 0;
      },
      milliseconds(10000)));
  std::printf("chaos e: %d streams: %d cancelled, %d finished first, %d other; KV blocks in use after: %d and %d\n",
              kCancelled, cancelled.load(), finished.load(), other.load(), used[0], used[1]);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(cancelled.load(), kCancelled * 9 / 10);
}

// Case f: the worker's --fault-drop-event-batch loses one batch of events on
// its way; the cachemanager sees the gap, asks for a snapshot, and ends exact.
TEST(RouterFailoverTest, ChaosF_ALostEventBatchIsRepairedAndTheIndexEndsExact) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 1, .worker_args = {"--fault-drop-event-batch", "2"}}).ok());
  for (int i = 0; i < 6; ++i) {
    const TextStreamResult r = cluster.Generate(TinyTextRequest(700 + i, 64, 4));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    std::this_thread::sleep_for(milliseconds(120));  // a batch of its own for each request's events
  }
  double gaps = 0;
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<PrometheusScrape> m = cluster.ScrapeCacheManager();
        gaps = m.ok() ? m->Sum("kvfleet_cachemanager_sequence_gaps_total") : 0;
        return gaps >= 1;
      },
      milliseconds(10000)))
      << "the fault was not injected";
  EXPECT_TRUE(IndexMatchesWorkers(cluster, 1, milliseconds(10000)));
  absl::StatusOr<v1::ListWorkersResponse> index = cluster.CacheManagerWorkers();
  std::printf(
      "chaos f: 1 event batch lost; %.0f gap seen, index holds %lld blocks, as the worker does\n", gaps,
      index.ok() && index->workers_size() > 0 ? static_cast<long long>(index->workers(0).indexed_blocks()) : -1);
}

// Case g.
TEST(RouterFailoverTest, ChaosG_ARouterRestartedMidLoadFailsItsStreamsUnavailableAndARetryWorks) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  constexpr int kInFlight = 8;
  std::vector<TextStreamResult> results(kInFlight);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kInFlight; ++i) {
    threads.emplace_back([&, i] {
      results[i] = cluster.Generate(TinyTextRequest(800 + i, 10, 3000), std::nullopt, [&](const TextStreamResult& r) {
        if (r.messages == 1) started++;
        return false;
      });
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return started.load() == kInFlight; }, milliseconds(30000)));
  ASSERT_TRUE(cluster.RestartRouter().ok());
  for (std::thread& t : threads) t.join();
  int unavailable = 0;
  for (const TextStreamResult& r : results) unavailable += r.status.error_code() == grpc::StatusCode::UNAVAILABLE;
  EXPECT_EQ(unavailable, kInFlight);
  ASSERT_TRUE(cluster.WaitForLiveWorkers(2, milliseconds(20000)));
  int retried_ok = 0;
  for (int i = 0; i < kInFlight; ++i) retried_ok += cluster.Generate(TinyTextRequest(800 + i, 10, 16)).status.ok();
  std::printf("chaos g: %d streams in flight when the router died: %d UNAVAILABLE; %d of %d retries ok\n", kInFlight,
              unavailable, retried_ok, kInFlight);
  EXPECT_EQ(retried_ok, kInFlight);
}

// Case h.
TEST(RouterFailoverTest, ChaosH_AKilledWorkerRestartedUnderItsIdRejoinsAndIsSentWork) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  cluster.KillWorker(0);
  ASSERT_TRUE(cluster.WaitForLiveWorkers(1, milliseconds(10000)));
  ASSERT_TRUE(cluster.StartWorker(0).ok());
  ASSERT_TRUE(cluster.WaitForLiveWorkers(2, milliseconds(20000)));
  int on_restarted = 0, total = 0;
  for (; total < 40 && on_restarted < 3; ++total) {
    const TextStreamResult r = cluster.Generate(TinyTextRequest(900 + total, 10, 4));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    on_restarted += r.worker_ids.front() == "worker-0";
  }
  std::printf("chaos h: worker-0 killed and restarted: %d of %d requests after it rejoined served by it\n",
              on_restarted, total);
  EXPECT_GE(on_restarted, 3);
}

}  // namespace
}  // namespace kvfleet::testing
