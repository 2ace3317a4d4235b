#include "engine/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

namespace kvfleet::engine {
namespace {

Request MakeRequest(uint64_t id, std::vector<model::TokenId> prompt, std::string salt = "") {
  return Request(EngineRequest{.id = RequestId(id), .prompt = std::move(prompt), .cache_salt = std::move(salt)}, 0, id,
                 nullptr);
}

void Compute(KvCacheManager& kv, Request& r) {
  ASSERT_TRUE(kv.Allocate(r, r.num_pending_tokens()));
  r.num_computed_tokens = r.num_tokens();
  kv.CommitFullBlocks(r);
}

TEST(KvCacheManagerTest, AllocatesOnDemandAllOrNothing) {
  BlockPool pool(5, nullptr);
  KvCacheManager kv(pool, 4, "m");
  Request r = MakeRequest(1, std::vector<model::TokenId>(9, 3));
  ASSERT_TRUE(kv.Allocate(r, 9));
  EXPECT_EQ(r.block_table.size(), 3u);
  ASSERT_TRUE(kv.Allocate(r, 3));  // still within 3 blocks (12 slots)
  EXPECT_EQ(r.block_table.size(), 3u);
  EXPECT_FALSE(kv.Allocate(r, 21));  // needs 6 blocks: nothing taken
  EXPECT_EQ(r.block_table.size(), 3u);
  EXPECT_EQ(pool.num_free(), 2);
  kv.Free(r);
  EXPECT_EQ(pool.num_free(), 5);
}

TEST(KvCacheManagerTest, ReusesTheLongestCachedPrefixButNeverTheLastToken) {
  BlockPool pool(16, nullptr);
  KvCacheManager kv(pool, 4, "m");
  std::vector<model::TokenId> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Request a = MakeRequest(1, prompt);
  EXPECT_EQ(kv.AcquireCachedPrefix(a), 0);
  kv.RecordAdmission(a);
  Compute(kv, a);
  EXPECT_EQ(a.block_hashes.size(), 2u);  // two full blocks published

  Request b = MakeRequest(2, {1, 2, 3, 4, 5, 6, 7, 8, 42});
  EXPECT_EQ(kv.AcquireCachedPrefix(b), 8);
  kv.RecordAdmission(b);
  kv.RecordAdmission(b);  // counted once
  EXPECT_EQ(b.block_table, std::vector<BlockId>(a.block_table.begin(), a.block_table.begin() + 2));
  EXPECT_EQ(pool.ref_count(a.block_table[0]), 2);

  // Exactly two full blocks: the last token is recomputed, so only one block hits.
  Request c = MakeRequest(3, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(kv.AcquireCachedPrefix(c), 4);
  kv.RecordAdmission(c);

  Request other_tenant = MakeRequest(4, prompt, "salt");
  EXPECT_EQ(kv.AcquireCachedPrefix(other_tenant), 0);
  kv.RecordAdmission(other_tenant);
  EXPECT_EQ(kv.counters().queried_tokens, 10 + 9 + 8 + 10);
  EXPECT_EQ(kv.counters().hit_tokens, 8 + 4);
}

TEST(KvCacheManagerTest, FreedBlocksStayCachedUntilEvicted) {
  BlockPool pool(4, nullptr);
  KvCacheManager kv(pool, 4, "m");
  Request a = MakeRequest(1, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Compute(kv, a);
  kv.Free(a);
  EXPECT_EQ(pool.Stats().cached, 2);
  Request b = MakeRequest(2, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(kv.AcquireCachedPrefix(b), 8);
  kv.Free(b);
  // Fill the pool with unrelated blocks: the cache gives way.
  Request c = MakeRequest(3, std::vector<model::TokenId>(16, 77));
  ASSERT_TRUE(kv.Allocate(c, 16));
  Request d = MakeRequest(4, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(kv.AcquireCachedPrefix(d), 0);
}

}  // namespace
}  // namespace kvfleet::engine
