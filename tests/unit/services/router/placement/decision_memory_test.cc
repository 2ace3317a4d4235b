// DecisionMemory: leading-block lookups, expiry at exactly the TTL, refresh,
// the size caps, in-flight sums, Forget; and a randomized comparison with a
// naive model (a list of every live decision).
#include "services/router/placement/decision_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using std::chrono::milliseconds;
using testing::MakeRequest;
using testing::Tokens;
using Clock = DecisionMemory::Clock;

constexpr int32_t kBs = 4;

DecisionMemory::Limits Limits(int64_t max_blocks = 1 << 20, int64_t max_in_flight = 1 << 20) {
  return {.prefix_ttl = milliseconds(1000),
          .max_blocks = max_blocks,
          .in_flight_ttl = milliseconds(100),
          .max_in_flight = max_in_flight};
}

std::vector<BlockHash> Hashes(int32_t seed, int32_t blocks) {
  return MakeRequest(Tokens(seed, blocks, kBs), kBs).block_hashes;
}

const std::vector<std::string> kWorkers = {"a", "b", "c"};

TEST(DecisionMemoryTest, RemembersLeadingBlocksPerWorker) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> prompt = Hashes(1, 6);
  m.Record("a", std::span(prompt).first(4), 4, t0);
  m.Record("b", prompt, 6, t0);
  EXPECT_EQ(m.RememberedBlocks(prompt, kWorkers, t0), (std::vector<int32_t>{4, 6, 0}));
  // A longer prompt with the same start; a prompt sharing only 2 blocks.
  std::vector<BlockHash> longer = Hashes(1, 9);
  EXPECT_EQ(m.RememberedBlocks(longer, kWorkers, t0), (std::vector<int32_t>{4, 6, 0}));
  std::vector<BlockHash> fork = Hashes(2, 5);
  fork[0] = prompt[0];
  fork[1] = prompt[1];
  EXPECT_EQ(m.RememberedBlocks(fork, kWorkers, t0), (std::vector<int32_t>{2, 2, 0}));
  EXPECT_EQ(m.RememberedBlocks(Hashes(3, 5), kWorkers, t0), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(m.remembered_blocks(), 10);
}

TEST(DecisionMemoryTest, OnlyLeadingBlocksCount) {
  DecisionMemory m(Limits());
  const std::vector<BlockHash> prompt = Hashes(1, 6);
  // As if the worker had been sent blocks 2..5 only: no leading block, no match.
  m.Record("a", std::span(prompt).subspan(2), 4, Clock::time_point{});
  EXPECT_EQ(m.RememberedBlocks(prompt, kWorkers, Clock::time_point{}), (std::vector<int32_t>{0, 0, 0}));
}

TEST(DecisionMemoryTest, ExpiresExactlyAfterTheTtlAndRefreshExtends) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 3);
  m.Record("a", p, 3, t0);
  m.Record("b", p, 3, t0);
  m.Record("b", std::span(p).first(2), 0, t0 + milliseconds(600));  // refreshes b's first two blocks
  m.Expire(t0 + milliseconds(999));
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(999)), (std::vector<int32_t>{3, 3, 0}));
  m.Expire(t0 + milliseconds(1000));
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(1000)), (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(m.remembered_blocks(), 2);
  m.Expire(t0 + milliseconds(1600));
  EXPECT_EQ(m.remembered_blocks(), 0);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(1600)), (std::vector<int32_t>{0, 0, 0}));
}

TEST(DecisionMemoryTest, LookupIgnoresExpiredHoldersEvenBeforeExpire) {
  DecisionMemory m(Limits());
  const std::vector<BlockHash> p = Hashes(1, 3);
  m.Record("a", p, 3, Clock::time_point{});
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, Clock::time_point{} + milliseconds(1000)), (std::vector<int32_t>{0, 0, 0}));
}

TEST(DecisionMemoryTest, CapDropsOldestEntries) {
  DecisionMemory m(Limits(/*max_blocks=*/5));
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 3), q = Hashes(2, 3);
  m.Record("a", p, 3, t0);
  m.Record("b", q, 3, t0 + milliseconds(1));
  EXPECT_EQ(m.remembered_blocks(), 5);
  // p's first block went first, so nothing of p is a leading match any more.
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(1)), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(m.RememberedBlocks(q, kWorkers, t0 + milliseconds(1)), (std::vector<int32_t>{0, 3, 0}));
}

TEST(DecisionMemoryTest, InFlightSumsAndExpiry) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  m.Record("a", {}, 7, t0);
  m.Record("a", {}, 3, t0 + milliseconds(50));
  m.Record("b", {}, 2, t0 + milliseconds(50));
  EXPECT_EQ(m.InFlightLoad("a").requests, 2);
  EXPECT_EQ(m.InFlightLoad("a").blocks, 10);
  EXPECT_EQ(m.InFlightLoad("c").requests, 0);
  EXPECT_EQ(m.in_flight(), 3);
  m.Expire(t0 + milliseconds(100));
  EXPECT_EQ(m.InFlightLoad("a").requests, 1);
  EXPECT_EQ(m.InFlightLoad("a").blocks, 3);
  m.Expire(t0 + milliseconds(150));
  EXPECT_EQ(m.InFlightLoad("a").requests, 0);
  EXPECT_EQ(m.InFlightLoad("b").blocks, 0);
  EXPECT_EQ(m.in_flight(), 0);
}

TEST(DecisionMemoryTest, SettledRequestsStopCountingOnceAndKeepTheirPrefix) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 3);
  const uint64_t first = m.Record("a", p, 7, t0);
  const uint64_t second = m.Record("a", {}, 3, t0);
  const uint64_t other = m.Record("b", {}, 2, t0);
  EXPECT_NE(first, 0u);
  m.Settle(first);
  EXPECT_EQ(m.InFlightLoad("a").requests, 1);
  EXPECT_EQ(m.InFlightLoad("a").blocks, 3);
  EXPECT_EQ(m.in_flight(), 2);
  m.Settle(first);  // twice: ignored
  m.Settle(0);      // no ticket: ignored
  EXPECT_EQ(m.InFlightLoad("a").blocks, 3);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0), (std::vector<int32_t>{3, 0, 0}));
  // Expiry of a settled entry takes nothing off again.
  m.Expire(t0 + milliseconds(100));
  EXPECT_EQ(m.InFlightLoad("a").requests, 0);
  EXPECT_EQ(m.InFlightLoad("b").requests, 0);
  EXPECT_EQ(m.in_flight(), 0);
  m.Settle(second);  // expired: ignored
  m.Settle(other);
  EXPECT_EQ(m.in_flight(), 0);
  EXPECT_EQ(m.InFlightLoad("a").blocks, 0);
  // Forget after a settle leaves the count right.
  const uint64_t third = m.Record("c", {}, 4, t0 + milliseconds(200));
  m.Record("c", {}, 5, t0 + milliseconds(200));
  m.Settle(third);
  m.Forget("c");
  EXPECT_EQ(m.in_flight(), 0);
}

TEST(DecisionMemoryTest, InFlightCap) {
  DecisionMemory m(Limits(1 << 20, /*max_in_flight=*/2));
  for (int i = 0; i < 5; ++i) m.Record("a", {}, 1, Clock::time_point{});
  EXPECT_EQ(m.InFlightLoad("a").requests, 2);
  EXPECT_EQ(m.in_flight(), 2);
}

TEST(DecisionMemoryTest, ZeroTtlsRememberNothing) {
  DecisionMemory m({.prefix_ttl = {}, .max_blocks = 10, .in_flight_ttl = {}, .max_in_flight = 10});
  const std::vector<BlockHash> p = Hashes(1, 3);
  m.Record("a", p, 3, Clock::time_point{});
  EXPECT_EQ(m.remembered_blocks(), 0);
  EXPECT_EQ(m.in_flight(), 0);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, Clock::time_point{}), (std::vector<int32_t>{0, 0, 0}));
}

TEST(DecisionMemoryTest, ForgetDropsTheWorkerAndItsStaleEntriesNeverMatchAgain) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 4);
  m.Record("a", p, 4, t0);
  m.Record("b", p, 4, t0);
  m.Forget("a");
  m.Forget("nobody");
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0), (std::vector<int32_t>{0, 4, 0}));
  EXPECT_EQ(m.InFlightLoad("a").requests, 0);
  EXPECT_EQ(m.in_flight(), 1);
  EXPECT_EQ(m.remembered_blocks(), 4);
  // "a" comes back at the same instant with the same prompt: its old FIFO
  // entries (same hashes, same expiry) must not remove the new ones.
  m.Record("a", std::span(p).first(2), 2, t0);
  m.Expire(t0 + milliseconds(100));  // the in-flight entries, old and new, reach the front
  EXPECT_EQ(m.InFlightLoad("a").requests, 0);
  EXPECT_EQ(m.in_flight(), 0);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(100)), (std::vector<int32_t>{2, 4, 0}));
  m.Expire(t0 + milliseconds(1000));
  EXPECT_EQ(m.remembered_blocks(), 0);
}

// Randomized: after every step the memory answers exactly as a naive list of
// live decisions does (longest common prefix with any live decision per
// worker; in-flight sums over live decisions).
TEST(DecisionMemoryTest, MatchesNaiveModel) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    DecisionMemory m(Limits());
    struct Made {
      std::string worker;
      std::vector<BlockHash> hashes;
      int32_t blocks;
      Clock::time_point at;
    };
    std::vector<Made> made;
    // A few prompt families: family f's prompts share leading blocks.
    std::vector<std::vector<BlockHash>> families;
    for (int f = 0; f < 4; ++f) families.push_back(Hashes(static_cast<int32_t>(seed * 10 + f), 12));
    Clock::time_point now{};
    const std::vector<std::string> workers = {"a", "b", "c", "d"};
    for (int step = 0; step < 400; ++step) {
      now += milliseconds(rng() % 40);
      m.Expire(now);
      const auto& fam = families[rng() % families.size()];
      std::vector<BlockHash> query(fam.begin(), fam.begin() + rng() % (fam.size() + 1));
      if (rng() % 3 == 0 && !query.empty()) query.back() = Hashes(static_cast<int32_t>(rng()), 1)[0];  // diverge
      if (rng() % 10 == 0) {
        const std::string w = workers[rng() % workers.size()];
        m.Forget(w);
        std::erase_if(made, [&](const Made& d) { return d.worker == w; });
      } else {
        const std::string w = workers[rng() % workers.size()];
        const int32_t blocks = static_cast<int32_t>(rng() % 5);
        m.Record(w, query, blocks, now);
        made.push_back({w, query, blocks, now});
      }
      const auto& fam2 = families[rng() % families.size()];
      std::vector<BlockHash> probe(fam2.begin(), fam2.begin() + rng() % (fam2.size() + 1));
      std::vector<int32_t> want(workers.size(), 0);
      int64_t want_in_flight = 0;
      for (size_t w = 0; w < workers.size(); ++w) {
        int32_t requests = 0;
        int64_t blocks = 0;
        for (const Made& d : made) {
          if (d.worker != workers[w]) continue;
          if (d.at + milliseconds(1000) > now) {
            const auto lcp = std::mismatch(d.hashes.begin(), d.hashes.end(), probe.begin(), probe.end());
            want[w] = std::max(want[w], static_cast<int32_t>(lcp.first - d.hashes.begin()));
          }
          if (d.at + milliseconds(100) > now) {
            ++requests;
            blocks += d.blocks;
          }
        }
        EXPECT_EQ(m.InFlightLoad(workers[w]).requests, requests) << "seed " << seed << " step " << step;
        EXPECT_EQ(m.InFlightLoad(workers[w]).blocks, blocks) << "seed " << seed << " step " << step;
        want_in_flight += requests;
      }
      ASSERT_EQ(m.RememberedBlocks(probe, workers, now), want) << "seed " << seed << " step " << step;
      ASSERT_EQ(m.in_flight(), want_in_flight) << "seed " << seed << " step " << step;
    }
  }
}


TEST(DecisionMemoryTest, AReportThatIncludesATicketEndsItsInFlightCountAndThoseBefore) {
  DecisionMemory m({.prefix_ttl = milliseconds(1000), .max_blocks = 1 << 20, .in_flight_ttl = milliseconds(60000),
                    .max_in_flight = 1 << 20});
  const Clock::time_point t0{};
  const uint64_t a1 = m.Record("a", {}, 4, t0);
  const uint64_t b1 = m.Record("b", {}, 2, t0);
  const uint64_t a2 = m.Record("a", {}, 3, t0);
  const uint64_t a3 = m.Record("a", {}, 5, t0);
  EXPECT_LT(a1, b1);
  EXPECT_LT(b1, a2);
  EXPECT_EQ(m.InFlightLoad("a").requests, 3);
  // a's report includes a1 and a2 (its newest admitted ticket is a2); b's
  // tickets are not a's to acknowledge.
  m.Acknowledge("a", a2);
  EXPECT_EQ(m.InFlightLoad("a").requests, 1);
  EXPECT_EQ(m.InFlightLoad("a").blocks, 5);
  EXPECT_EQ(m.InFlightLoad("b").requests, 1);
  // An older report, a settled ticket and an unknown worker change nothing.
  m.Acknowledge("a", a1);
  m.Settle(a2);
  m.Acknowledge("nobody", a3);
  EXPECT_EQ(m.InFlightLoad("a").requests, 1);
  EXPECT_EQ(m.in_flight(), 2);
  m.Acknowledge("a", a3);
  m.Acknowledge("b", b1);
  EXPECT_EQ(m.in_flight(), 0);
  // Long before the safety bound: nothing was left to expire.
  m.Expire(t0 + milliseconds(100));
  EXPECT_EQ(m.remembered_blocks(), 0);
}

TEST(DecisionMemoryTest, EachDecisionHasItsOwnPrefixTtl) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 4), q = Hashes(2, 4);
  m.Record("a", p, 4, t0, milliseconds(30000));  // a long cold prefill
  m.Record("b", q, 4, t0, milliseconds(200));    // a short one
  m.Expire(t0 + milliseconds(5000));
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(5000))[0], 4);
  EXPECT_EQ(m.RememberedBlocks(q, kWorkers, t0 + milliseconds(5000))[1], 0);
  EXPECT_EQ(m.remembered_blocks(), 4);
  m.Expire(t0 + milliseconds(30000));
  EXPECT_EQ(m.remembered_blocks(), 0);
}

TEST(DecisionMemoryTest, ARetractedDecisionIsForgottenAtOnceButNotALaterOne) {
  DecisionMemory m(Limits());
  const Clock::time_point t0{};
  const std::vector<BlockHash> p = Hashes(1, 6);
  const uint64_t refused = m.Record("a", p, 6, t0);
  m.Retract("a", p, refused);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0)[0], 0);
  EXPECT_EQ(m.InFlightLoad("a").requests, 0);
  EXPECT_EQ(m.remembered_blocks(), 0);
  // A decision refreshed by a later one keeps the later one's memory.
  const uint64_t first = m.Record("b", p, 6, t0);
  m.Record("b", p, 6, t0 + milliseconds(10));
  m.Retract("b", p, first);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(20))[1], 6);
  // Nor does retracting the later one take what the first still computes.
  const uint64_t later = m.Record("b", p, 6, t0 + milliseconds(30));
  m.Retract("b", p, later);
  EXPECT_EQ(m.RememberedBlocks(p, kWorkers, t0 + milliseconds(20))[1], 6);
  EXPECT_EQ(m.InFlightLoad("b").requests, 1);
  // Stale heap entries never match again, and the slot frees once they go.
  m.Expire(t0 + milliseconds(2000));
  EXPECT_EQ(m.remembered_blocks(), 0);
  EXPECT_EQ(m.in_flight(), 0);
}

}  // namespace
}  // namespace kvfleet::router
