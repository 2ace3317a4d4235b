#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kvfleet {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      }, 4);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
    }
  }
}

TEST(ThreadPoolTest, RangesStartOnGrainBoundaries) {
  ThreadPool pool(3);
  std::atomic<bool> misaligned{false};
  pool.ParallelFor(100, [&](int64_t b, int64_t) {
    if (b % 8 != 0) misaligned = true;
  }, 8);
  EXPECT_FALSE(misaligned);
}

TEST(ThreadPoolTest, ChunksShrinkToOneGrainAtTheEnd) {
  // Big chunks first, one-grain chunks last: no thread waits long for
  // another's last chunk. The cut depends only on what is left at each
  // claim, so it is the same whichever thread claims.
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ParallelFor(
      1000,
      [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        ranges.emplace_back(b, e);
      },
      2);
  std::sort(ranges.begin(), ranges.end());
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front(), std::make_pair(int64_t{0}, int64_t{250}));  // a quarter: 2 threads, 2 x 2 shares
  EXPECT_EQ(ranges.back().second - ranges.back().first, 2);
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
    EXPECT_LE(ranges[i].second - ranges[i].first, ranges[i - 1].second - ranges[i - 1].first);
  }
  EXPECT_LT(ranges.size(), 40u);  // still few claims
}

TEST(ThreadPoolTest, ManyShortLoopsInARowLoseNothing) {
  // The pattern of a decode step: hundreds of tiny loops back to back, where
  // a late worker must never run a chunk of a finished or later loop.
  ThreadPool pool(3);
  for (int round = 0; round < 20000; ++round) {
    const int64_t n = 1 + round % 37;
    std::vector<int> hits(n, 0);
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "round " << round << " index " << i;
  }
}

}  // namespace
TEST(ThreadPoolTest, RunOnEachThreadRunsOnceOnEveryThread) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 20; ++round) {
      std::mutex mu;
      std::set<std::thread::id> ids;
      int calls = 0;
      pool.RunOnEachThread([&] {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
        ++calls;
      });
      EXPECT_EQ(calls, threads);
      EXPECT_EQ(static_cast<int>(ids.size()), threads) << "round " << round;
    }
  }
}

}  // namespace kvfleet
