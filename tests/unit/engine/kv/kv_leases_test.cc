// KvLeases: a prefill's blocks held for a decode worker's pull, released by
// the pull or at the deadline, under a bound on what leases may hold.
#include "engine/kv/kv_leases.h"

#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "engine/kv/block_pool.h"

namespace kvfleet::engine {
namespace {

using Clock = KvLeases::Clock;

// `n` blocks committed under hashes 1..n and released: cached, reusable.
std::vector<BlockHash> CachedBlocks(BlockPool& pool, int n, uint64_t first = 1) {
  std::vector<BlockHash> hashes;
  std::vector<BlockId> held;
  for (int i = 0; i < n; ++i) {
    const BlockId b = *pool.Allocate();
    hashes.push_back(BlockHash{0, first + static_cast<uint64_t>(i)});
    pool.Commit(b, hashes.back(), i == 0 ? std::nullopt : std::optional<BlockHash>(hashes[hashes.size() - 2]));
    held.push_back(b);
  }
  for (BlockId b : held) pool.Release(b);
  return hashes;
}

TEST(KvLeasesTest, ALeaseKeepsItsBlocksFromEvictionUntilThePullReleasesIt) {
  BlockPool pool(8, nullptr);
  const std::vector<BlockHash> hashes = CachedBlocks(pool, 4);
  KvLeases leases(pool, 8);
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(leases.Hold("split-1", hashes, now + std::chrono::seconds(30)), 4);
  EXPECT_EQ(pool.Stats().used, 4);
  // Every free block taken: eviction finds none of the leased ones.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.Allocate().has_value());
  EXPECT_FALSE(pool.Allocate().has_value());
  for (const BlockHash& h : hashes) EXPECT_TRUE(pool.IsCached(h));
  EXPECT_TRUE(leases.Release("split-1"));
  EXPECT_FALSE(leases.Release("split-1")) << "a lease ends once";
  EXPECT_EQ(leases.leased_blocks(), 0);
  EXPECT_EQ(pool.Stats().used, 4) << "only the four allocated above";
  EXPECT_EQ(pool.Stats().cached, 4) << "released blocks stay cached";
  EXPECT_EQ(leases.counters().released, 1);
}

TEST(KvLeasesTest, AnUnpulledLeaseExpiresAndItsBlocksBecomeOrdinaryCache) {
  BlockPool pool(8, nullptr);
  const std::vector<BlockHash> a = CachedBlocks(pool, 2, 1), b = CachedBlocks(pool, 2, 10);
  KvLeases leases(pool, 8);
  const Clock::time_point now = Clock::now();
  leases.Hold("a", a, now + std::chrono::seconds(1));
  leases.Hold("b", b, now + std::chrono::seconds(5));
  EXPECT_EQ(leases.NextDeadline(), now + std::chrono::seconds(1));
  EXPECT_EQ(leases.Expire(now), 0);
  EXPECT_EQ(leases.Expire(now + std::chrono::seconds(1)), 1);
  EXPECT_FALSE(leases.Holds("a"));
  EXPECT_TRUE(leases.Holds("b"));
  EXPECT_EQ(leases.NextDeadline(), now + std::chrono::seconds(5));
  EXPECT_EQ(pool.Stats().used, 2);
  EXPECT_EQ(leases.Expire(now + std::chrono::hours(1)), 1);
  EXPECT_EQ(pool.Stats().used, 0);
  EXPECT_EQ(pool.Stats().cached, 4);
  EXPECT_FALSE(leases.NextDeadline().has_value());
  EXPECT_EQ(leases.counters().expired, 2);
}

TEST(KvLeasesTest, ARenewedLeaseOutlivesItsFirstDeadline) {
  BlockPool pool(8, nullptr);
  const std::vector<BlockHash> hashes = CachedBlocks(pool, 3);
  KvLeases leases(pool, 8);
  const Clock::time_point now = Clock::now();
  ASSERT_EQ(leases.Hold("split-1", hashes, now + std::chrono::seconds(30)), 3);
  EXPECT_TRUE(leases.Renew("split-1", now + std::chrono::seconds(60)));
  EXPECT_FALSE(leases.Renew("split-2", now + std::chrono::seconds(60))) << "no such lease: nothing taken";
  EXPECT_EQ(leases.Expire(now + std::chrono::seconds(45)), 0);
  EXPECT_TRUE(leases.Holds("split-1"));
  EXPECT_EQ(leases.NextDeadline(), now + std::chrono::seconds(60));
  EXPECT_EQ(leases.Expire(now + std::chrono::seconds(60)), 1);
  EXPECT_FALSE(leases.Renew("split-1", now + std::chrono::seconds(90))) << "an ended lease is not taken again";
  EXPECT_EQ(leases.counters().renewed, 1);
  EXPECT_EQ(leases.counters().expired, 1);
}

TEST(KvLeasesTest, TheBoundEndsTheOldestLeasesFirst) {
  BlockPool pool(16, nullptr);
  const std::vector<BlockHash> a = CachedBlocks(pool, 3, 1), b = CachedBlocks(pool, 3, 10),
                               c = CachedBlocks(pool, 3, 20);
  KvLeases leases(pool, /*max_blocks=*/6);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  leases.Hold("a", a, deadline);
  leases.Hold("b", b, deadline);
  EXPECT_EQ(leases.leased_blocks(), 6);
  leases.Hold("c", c, deadline);
  EXPECT_FALSE(leases.Holds("a"));
  EXPECT_TRUE(leases.Holds("b"));
  EXPECT_TRUE(leases.Holds("c"));
  EXPECT_EQ(leases.leased_blocks(), 6);
  EXPECT_EQ(leases.counters().displaced, 1);
  EXPECT_EQ(pool.Stats().used, 6);
}

TEST(KvLeasesTest, ALeaseTakesTheLeadingBlocksStillCachedAndNothingWhenNoneIs) {
  BlockPool pool(8, nullptr);
  std::vector<BlockHash> hashes = CachedBlocks(pool, 3);
  hashes.insert(hashes.begin() + 2, BlockHash{0, 99});  // evicted or never computed
  KvLeases leases(pool, 8);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  EXPECT_EQ(leases.Hold("x", hashes, deadline), 2);
  const std::vector<BlockHash> none = {BlockHash{0, 98}};
  EXPECT_EQ(leases.Hold("y", none, deadline), 0);
  EXPECT_FALSE(leases.Holds("y"));
  // A second lease of the same id replaces the first.
  EXPECT_EQ(leases.Hold("x", std::span(hashes).first(1), deadline), 1);
  EXPECT_EQ(leases.leased_blocks(), 1);
  std::vector<int32_t> refs(8, 0);
  leases.CountReferences(refs);
  int32_t total = 0;
  for (int32_t r : refs) total += r;
  EXPECT_EQ(total, 1);
}

TEST(KvLeasesTest, DestroyingTheLeasesGivesEveryBlockBack) {
  BlockPool pool(8, nullptr);
  const std::vector<BlockHash> hashes = CachedBlocks(pool, 4);
  {
    KvLeases leases(pool, 8);
    leases.Hold("a", hashes, Clock::now() + std::chrono::seconds(30));
    EXPECT_EQ(pool.Stats().used, 4);
  }
  EXPECT_EQ(pool.Stats().used, 0);
  EXPECT_EQ(pool.Stats().cached, 4);
}

}  // namespace
}  // namespace kvfleet::engine
