// Placement and propagation through a real cluster: requests sharing a long
// prefix land on the worker that holds it (the workers' own counters say
// so), unrelated requests spread, a static worker list works without a
// cachemanager, and a client's deadline or cancellation reaches the worker,
// whose KV blocks return to their baseline.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

double WorkerCounter(WorkerHarness& w, const std::string& name) {
  absl::StatusOr<PrometheusScrape> scrape = w.ScrapeMetrics();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? scrape->Sum(name) : -1;
}

int WorkerIndex(const std::string& id) { return std::stoi(id.substr(std::string("worker-").size())); }

TEST(RouterPlacementTest, RequestsSharingALongPrefixLandOnTheWorkerHoldingIt) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 3}).ok());
  const v1::GenerateTextRequest prefix = TinyTextRequest(500, 256, 8);  // 16 full blocks
  auto with_suffix = [&](int i) {
    v1::GenerateTextRequest r = prefix;
    for (int k = 0; k < 5; ++k) r.add_prompt_token_ids(3 + (i * 7 + k) % 100);
    return r;
  };
  const TextStreamResult first = cluster.Generate(with_suffix(0));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const std::string holder = first.worker_ids.front();
  for (int i = 1; i <= 6; ++i) {
    const TextStreamResult r = cluster.Generate(with_suffix(i));
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.worker_ids.front(), holder) << "request " << i;
    EXPECT_GE(r.usage.cached_prompt_tokens(), 256) << "request " << i;
  }
  // The workers' own counters: only the holder served cached prompt tokens.
  for (int w = 0; w < 3; ++w) {
    const double cached = WorkerCounter(cluster.worker(w), "kvfleet_worker_cached_prompt_tokens_total");
    if (w == WorkerIndex(holder)) {
      EXPECT_GE(cached, 6 * 256);
    } else {
      EXPECT_EQ(cached, 0) << "worker-" << w;
    }
  }
  absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
  ASSERT_TRUE(scrape.ok());
  EXPECT_GE(scrape->Value("kvfleet_router_routing_decisions_total",
                          {{"model", "tiny"}, {"policy", "prefix_aware"}, {"reason", "prefix_hit"}})
                    .value_or(0) +
                scrape
                    ->Value("kvfleet_router_routing_decisions_total",
                            {{"model", "tiny"}, {"policy", "prefix_aware"}, {"reason", "recent_decision"}})
                    .value_or(0),
            6);
}

// The honest load signal end to end: a worker admits a request and at once
// reports it with the router's ticket (worker -> cachemanager -> router,
// within a flush, not at the end of a step); the router's next decision
// sees the ticket and stops counting that request as its own in-flight load,
// while the request is still streaming.
TEST(RouterPlacementTest, AWorkersLoadReportCarriesTheRoutersTicketWhileTheRequestRuns) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2}).ok());
  bool checked = false;
  const TextStreamResult long_one =
      cluster.Generate(TinyTextRequest(700, 30, 4000), std::nullopt, [&](const TextStreamResult& partial) {
        if (partial.tokens.size() < 3 || checked) return checked;
        checked = true;
        uint64_t router = 0, ticket = 0;
        int32_t running = 0;
        EXPECT_TRUE(WaitUntil(
            [&] {
              absl::StatusOr<v1::ListWorkersResponse> index = cluster.CacheManagerWorkers();
              if (!index.ok()) return false;
              for (const v1::WorkerEntry& w : index->workers()) {
                if (w.load().admitted_size() == 0) continue;
                router = w.load().admitted(0).router();
                ticket = w.load().admitted(0).ticket();
                running = w.load().running() + w.load().waiting();
                return true;
              }
              return false;
            },
            milliseconds(5000)));
        EXPECT_NE(router, 0u);
        EXPECT_GE(ticket, 1u);
        EXPECT_EQ(running, 1);  // the report that carries the ticket counts the request
        // The next decision reads that report: the long request stops
        // counting in flight, and the short one settles when it ends.
        EXPECT_TRUE(cluster.Generate(TinyTextRequest(701, 10, 2)).status.ok());
        absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
        EXPECT_TRUE(scrape.ok());
        if (scrape.ok()) {
          EXPECT_EQ(scrape->Value("kvfleet_router_placement_in_flight", {}), 0);
        }
        return true;  // cancel the long one
      });
  EXPECT_TRUE(checked);
  EXPECT_EQ(long_one.status.error_code(), grpc::StatusCode::CANCELLED) << long_one.status.error_message();
}

TEST(RouterPlacementTest, UnrelatedConcurrentRequestsSpreadOverTheWorkers) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 3}).ok());
  constexpr int kRequests = 12;
  std::vector<TextStreamResult> results(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] { results[i] = cluster.Generate(TinyTextRequest(600 + i, 64, 200)); });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, int> per_worker;
  for (const TextStreamResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    per_worker[r.worker_ids.front()]++;
  }
  EXPECT_EQ(per_worker.size(), 3u);
  for (const auto& [worker, n] : per_worker) EXPECT_LE(n, kRequests / 2) << worker;
}

TEST(RouterPlacementTest, AStaticWorkerListServesWithoutACacheManager) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 2, .static_workers = true}).ok());
  const v1::GenerateTextRequest prefix = TinyTextRequest(700, 128, 8);
  const TextStreamResult first = cluster.Generate(prefix);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  // The router's decision memory keeps the prefix on its worker.
  const TextStreamResult again = cluster.Generate(prefix);
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.worker_ids.front(), first.worker_ids.front());
  EXPECT_GE(again.usage.cached_prompt_tokens(), 112);
  absl::StatusOr<PrometheusScrape> scrape = cluster.ScrapeRouter();
  ASSERT_TRUE(scrape.ok());
  EXPECT_EQ(scrape->Sum("kvfleet_router_cachemanager_fallbacks_total"), 0);
}

class RouterPropagationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.Start({.workers = 2}).ok()); }

  int UsedBlocks() {
    int used = 0;
    for (int w = 0; w < cluster_.worker_count(); ++w) {
      absl::StatusOr<v1::WorkerStats> s = cluster_.worker(w).Stats();
      EXPECT_TRUE(s.ok());
      used += s.ok() ? s->blocks_used() : 1000000;
    }
    return used;
  }

  double CancelledOnWorkers() {
    double n = 0;
    for (int w = 0; w < cluster_.worker_count(); ++w) {
      absl::StatusOr<PrometheusScrape> scrape = cluster_.worker(w).ScrapeMetrics();
      EXPECT_TRUE(scrape.ok());
      if (scrape.ok()) {
        n += scrape->Value("kvfleet_worker_requests_total", {{"finish_reason", "cancelled"}}).value_or(0);
      }
    }
    return n;
  }

  RouterCluster cluster_;
};

TEST_F(RouterPropagationTest, TheClientsDeadlineCancelsTheRequestOnTheWorker) {
  ASSERT_EQ(UsedBlocks(), 0);
  const TextStreamResult r = cluster_.Generate(TinyTextRequest(800, 30, 4000), milliseconds(400));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  EXPECT_LT(r.tokens.size(), 4000u);
  EXPECT_TRUE(WaitUntil([&] { return UsedBlocks() == 0; }, milliseconds(10000))) << UsedBlocks();
  EXPECT_TRUE(WaitUntil([&] { return CancelledOnWorkers() == 1; }, milliseconds(10000)));
}

TEST_F(RouterPropagationTest, CancelledStreamsFreeTheirBlocksOnTheWorkers) {
  ASSERT_EQ(UsedBlocks(), 0);
  constexpr int kStreams = 10;
  std::vector<std::thread> threads;
  std::vector<TextStreamResult> results(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      results[i] = cluster_.Generate(TinyTextRequest(900 + i, 30, 4000), std::nullopt,
                                     [](const TextStreamResult& partial) { return partial.tokens.size() >= 3; });
    });
  }
  for (std::thread& t : threads) t.join();
  for (const TextStreamResult& r : results) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
    EXPECT_LT(r.tokens.size(), 4000u);
  }
  EXPECT_TRUE(WaitUntil([&] { return UsedBlocks() == 0; }, milliseconds(10000))) << UsedBlocks();
  EXPECT_TRUE(WaitUntil([&] { return CancelledOnWorkers() == kStreams; }, milliseconds(10000))) << CancelledOnWorkers();
  absl::StatusOr<PrometheusScrape> scrape = cluster_.ScrapeRouter();
  ASSERT_TRUE(scrape.ok());
  EXPECT_EQ(scrape->Value("kvfleet_router_requests_total", {{"method", "Generate"}, {"code", "cancelled"}}), kStreams);
}

}  // namespace
}  // namespace kvfleet::testing
