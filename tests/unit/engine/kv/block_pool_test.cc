#include "engine/kv/block_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/testing/recording_kv_listener.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::KvEvent;
using ::kvfleet::testing::RecordingKvListener;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Synthetic hashes: the pool treats hashes as opaque keys.
BlockHash H(uint64_t n) { return BlockHash{.hi = n, .lo = ~n}; }

void ExpectStats(const BlockPool& pool, int32_t used, int32_t cached, int32_t empty) {
  const BlockPoolStats s = pool.Stats();
  EXPECT_EQ(s.total, pool.num_blocks());
  EXPECT_EQ(s.used, used);
  EXPECT_EQ(s.cached, cached);
  EXPECT_EQ(s.empty, empty);
  EXPECT_EQ(s.free(), cached + empty);
  EXPECT_EQ(pool.num_free(), cached + empty);
}

std::vector<BlockId> AllocateAll(BlockPool& pool) {
  std::vector<BlockId> blocks;
  while (std::optional<BlockId> b = pool.Allocate()) blocks.push_back(*b);
  return blocks;
}

class BlockPoolTest : public ::testing::Test {
 protected:
  RecordingKvListener listener_;
};

TEST_F(BlockPoolTest, FreshPoolIsAllEmptyAndAllocatesInIdOrder) {
  BlockPool pool(4, &listener_);
  EXPECT_EQ(pool.num_blocks(), 4);
  ExpectStats(pool, 0, 0, 4);
  EXPECT_THAT(AllocateAll(pool), ElementsAre(BlockId(0), BlockId(1), BlockId(2), BlockId(3)));
  ExpectStats(pool, 4, 0, 0);
  for (int32_t b = 0; b < 4; ++b) {
    EXPECT_EQ(pool.ref_count(BlockId(b)), 1);
    EXPECT_EQ(pool.hash_of(BlockId(b)), std::nullopt);
  }
  EXPECT_THAT(listener_.events(), IsEmpty());
}

TEST_F(BlockPoolTest, ExhaustionIsAnExpectedValue) {
  BlockPool pool(2, &listener_);
  ASSERT_EQ(AllocateAll(pool).size(), 2u);
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  ExpectStats(pool, 2, 0, 0);

  BlockPool none(0, &listener_);
  EXPECT_EQ(none.Allocate(), std::nullopt);
  ExpectStats(none, 0, 0, 0);
}

TEST_F(BlockPoolTest, InUseToEmptyWithoutHash) {
  BlockPool pool(2, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Release(b);
  EXPECT_EQ(pool.ref_count(b), 0);
  ExpectStats(pool, 0, 0, 2);
}

TEST_F(BlockPoolTest, InUseToCachedKeepsHash) {
  BlockPool pool(2, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  ExpectStats(pool, 1, 0, 1);  // in use with a hash counts as used
  EXPECT_TRUE(pool.IsCached(H(1)));
  pool.Release(b);
  ExpectStats(pool, 0, 1, 1);
  EXPECT_EQ(pool.hash_of(b), H(1));
  EXPECT_TRUE(pool.IsCached(H(1)));
}

TEST_F(BlockPoolTest, CachedToInUseOnHit) {
  BlockPool pool(2, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  pool.Release(b);
  EXPECT_EQ(pool.AcquireCached(H(1)), b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.hash_of(b), H(1));
  ExpectStats(pool, 1, 0, 1);
}

TEST_F(BlockPoolTest, HitOnBlockInUseAddsAReference) {
  BlockPool pool(2, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  EXPECT_EQ(pool.AcquireCached(H(1)), b);
  EXPECT_EQ(pool.ref_count(b), 2);
  ExpectStats(pool, 1, 0, 1);
  pool.Release(b);
  ExpectStats(pool, 1, 0, 1);
  pool.Release(b);
  ExpectStats(pool, 0, 1, 1);
}

TEST_F(BlockPoolTest, CachedToInUseByEvictionDropsHash) {
  BlockPool pool(1, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  pool.Release(b);
  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.hash_of(b), std::nullopt);
  EXPECT_FALSE(pool.IsCached(H(1)));
  EXPECT_EQ(pool.AcquireCached(H(1)), std::nullopt);
  ExpectStats(pool, 1, 0, 0);
  EXPECT_THAT(listener_.events(), ElementsAre(KvEvent::Stored(H(1), std::nullopt), KvEvent::Removed(H(1))));
}

TEST_F(BlockPoolTest, RetainAndReleaseCountHolders) {
  BlockPool pool(1, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Retain(b);
  pool.Retain(b);
  EXPECT_EQ(pool.ref_count(b), 3);
  pool.Release(b);
  pool.Release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.num_free(), 0);
  pool.Release(b);
  EXPECT_EQ(pool.num_free(), 1);
}

TEST_F(BlockPoolTest, EvictsLeastRecentlyReleasedFirst) {
  BlockPool pool(4, &listener_);
  const std::vector<BlockId> b = AllocateAll(pool);
  for (int i = 0; i < 4; ++i) pool.Commit(b[i], H(10 + i), std::nullopt);
  for (int i : {2, 0, 3, 1}) pool.Release(b[i]);
  listener_.ClearEvents();
  EXPECT_THAT(AllocateAll(pool), ElementsAre(b[2], b[0], b[3], b[1]));
  EXPECT_THAT(listener_.events(), ElementsAre(KvEvent::Removed(H(12)), KvEvent::Removed(H(10)), KvEvent::Removed(H(13)),
                                              KvEvent::Removed(H(11))));
}

TEST_F(BlockPoolTest, EmptyAndCachedShareOneListInReleaseOrder) {
  BlockPool pool(3, &listener_);
  const std::vector<BlockId> b = AllocateAll(pool);
  pool.Commit(b[1], H(1), std::nullopt);
  for (int i : {1, 2, 0}) pool.Release(b[i]);
  ExpectStats(pool, 0, 1, 2);
  // The cached block was released first, so it goes first despite being the
  // only one with reusable contents: the list is pure LRU.
  EXPECT_THAT(AllocateAll(pool), ElementsAre(b[1], b[2], b[0]));
}

TEST_F(BlockPoolTest, HitUnlinksFromTheMiddleOfTheFreeList) {
  BlockPool pool(5, &listener_);
  const std::vector<BlockId> b = AllocateAll(pool);
  for (int i = 0; i < 5; ++i) pool.Commit(b[i], H(i), std::nullopt);
  for (int i = 0; i < 5; ++i) pool.Release(b[i]);
  EXPECT_EQ(pool.AcquireCached(H(2)), b[2]);  // middle
  EXPECT_EQ(pool.AcquireCached(H(0)), b[0]);  // head
  EXPECT_EQ(pool.AcquireCached(H(4)), b[4]);  // tail
  ExpectStats(pool, 3, 2, 0);
  pool.Release(b[2]);  // back at the tail
  EXPECT_THAT(AllocateAll(pool), ElementsAre(b[1], b[3], b[2]));
  EXPECT_EQ(pool.Allocate(), std::nullopt);
}

TEST_F(BlockPoolTest, MissMovesNothing) {
  BlockPool pool(3, &listener_);
  const std::vector<BlockId> b = AllocateAll(pool);
  pool.Commit(b[0], H(0), std::nullopt);
  pool.Release(b[0]);
  pool.Release(b[1]);
  listener_.ClearEvents();
  EXPECT_FALSE(pool.IsCached(H(99)));
  EXPECT_EQ(pool.AcquireCached(H(99)), std::nullopt);
  ExpectStats(pool, 1, 1, 1);
  EXPECT_THAT(listener_.events(), IsEmpty());
  EXPECT_THAT(AllocateAll(pool), ElementsAre(b[0], b[1]));
}

TEST_F(BlockPoolTest, DuplicateCommitKeepsTheFirstCopy) {
  BlockPool pool(3, &listener_);
  const BlockId first = *pool.Allocate();
  const BlockId second = *pool.Allocate();
  pool.Commit(first, H(7), std::nullopt);
  pool.Commit(second, H(7), std::nullopt);
  EXPECT_EQ(pool.hash_of(first), H(7));
  EXPECT_EQ(pool.hash_of(second), std::nullopt);
  EXPECT_THAT(listener_.events(), ElementsAre(KvEvent::Stored(H(7), std::nullopt)));
  pool.Release(second);
  pool.Release(first);
  ExpectStats(pool, 0, 1, 2);  // the duplicate became empty
  EXPECT_EQ(pool.AcquireCached(H(7)), first);
}

TEST_F(BlockPoolTest, RecommitUnderTheSameHashIsANoOp) {
  BlockPool pool(1, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(3), std::nullopt);
  pool.Commit(b, H(3), std::nullopt);
  EXPECT_EQ(pool.hash_of(b), H(3));
  EXPECT_EQ(listener_.events().size(), 1u);
}

TEST_F(BlockPoolTest, ListenerSeesTheSequenceOfChanges) {
  BlockPool pool(2, &listener_);
  const BlockId a = *pool.Allocate();
  const BlockId b = *pool.Allocate();
  pool.Commit(a, H(1), std::nullopt);
  pool.Commit(b, H(2), H(1));
  pool.Release(b);
  pool.Release(a);
  const BlockId c = *pool.Allocate();  // evicts b (released first)
  EXPECT_EQ(c, b);
  pool.Commit(c, H(3), H(1));
  pool.Release(c);
  pool.Clear();
  const BlockId d = *pool.Allocate();  // a, no longer hashed: no event
  EXPECT_EQ(d, a);
  EXPECT_THAT(listener_.events(), ElementsAre(KvEvent::Stored(H(1), std::nullopt), KvEvent::Stored(H(2), H(1)),
                                              KvEvent::Removed(H(2)), KvEvent::Stored(H(3), H(1)), KvEvent::Cleared()));
  EXPECT_THAT(listener_.errors(), IsEmpty());
}

TEST_F(BlockPoolTest, ClearDropsEveryHashAndKeepsBlocksFree) {
  BlockPool pool(3, &listener_);
  const std::vector<BlockId> b = AllocateAll(pool);
  pool.Commit(b[0], H(0), std::nullopt);
  pool.Commit(b[2], H(2), H(0));
  for (BlockId x : b) pool.Release(x);
  ExpectStats(pool, 0, 2, 1);
  pool.Clear();
  ExpectStats(pool, 0, 0, 3);
  EXPECT_FALSE(pool.IsCached(H(0)));
  EXPECT_FALSE(pool.IsCached(H(2)));
  for (BlockId x : b) EXPECT_EQ(pool.hash_of(x), std::nullopt);
  EXPECT_EQ(listener_.events().back(), KvEvent::Cleared());
  EXPECT_TRUE(listener_.live().empty());
  // The same hash can be stored again afterwards.
  const BlockId again = *pool.Allocate();
  pool.Commit(again, H(0), std::nullopt);
  EXPECT_EQ(pool.AcquireCached(H(0)), again);
}

TEST(BlockPoolNoListenerTest, WorksWithoutAListener) {
  BlockPool pool(1, nullptr);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  pool.Release(b);
  EXPECT_EQ(pool.Allocate(), b);  // eviction without a listener
  pool.Release(b);
  pool.Clear();
  ExpectStats(pool, 0, 0, 1);
}

using BlockPoolDeathTest = BlockPoolTest;

TEST_F(BlockPoolDeathTest, ReleaseBelowZero) {
  BlockPool pool(2, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Release(b);
  EXPECT_DEATH(pool.Release(b), "double free");
  EXPECT_DEATH(pool.Release(BlockId(1)), "double free");
}

TEST_F(BlockPoolDeathTest, BadIds) {
  BlockPool pool(2, &listener_);
  EXPECT_DEATH(pool.Retain(BlockId(2)), "out of range");
  EXPECT_DEATH(pool.Release(BlockId(-1)), "out of range");
  EXPECT_DEATH(pool.ref_count(BlockId(7)), "out of range");
  EXPECT_DEATH(pool.hash_of(BlockId(2)), "out of range");
  EXPECT_DEATH(pool.Commit(BlockId(2), H(1), std::nullopt), "out of range");
}

TEST_F(BlockPoolDeathTest, RetainOrCommitOfAFreeBlock) {
  BlockPool pool(2, &listener_);
  EXPECT_DEATH(pool.Retain(BlockId(0)), "Retain of free block");
  EXPECT_DEATH(pool.Commit(BlockId(0), H(1), std::nullopt), "Commit of free block");
}

TEST_F(BlockPoolDeathTest, RecommitUnderAnotherHash) {
  BlockPool pool(1, &listener_);
  const BlockId b = *pool.Allocate();
  pool.Commit(b, H(1), std::nullopt);
  EXPECT_DEATH(pool.Commit(b, H(2), std::nullopt), "committed as");
}

TEST_F(BlockPoolDeathTest, ClearWithABlockInUse) {
  BlockPool pool(2, &listener_);
  ASSERT_TRUE(pool.Allocate().has_value());
  EXPECT_DEATH(pool.Clear(), "in use");
}

}  // namespace
}  // namespace kvfleet::engine
