#include "engine/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// Two page groups: group 0 attends to every key, group 1 over a window of 8
// positions (two blocks of 4).
constexpr BlockId kFreed = KvCacheManager::kFreedPage;

std::vector<model::TokenId> Tokens(int n, int first = 1) {
  std::vector<model::TokenId> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(KvCacheManagerTest, WindowPagesAreGivenBackOnceTheWindowHasPassedThem) {
  BlockPool pool(16, nullptr);
  KvCacheManager kv(pool, 4, "m", true, {0, 8});
  Request r = MakeRequest(1, Tokens(20));
  Compute(kv, r);
  // Next position 20 reads keys 13..: blocks 3 and 4. Blocks 0-2 keep only
  // their group-0 page; their window pages are cached, not held.
  ASSERT_EQ(r.block_table.size(), 10u);
  EXPECT_EQ(kv.HeldBlocks(r), 5);
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_NE(r.block_table[2 * b], kFreed);
    EXPECT_EQ(r.block_table[2 * b + 1] == kFreed, b < 3) << "block " << b;
  }
  EXPECT_EQ(pool.Stats().used, 7);
  EXPECT_EQ(pool.Stats().cached, 3);
  // A decode step: position 20 joins block 5; the window moves to key 14.
  r.tokens.push_back(99);
  ASSERT_EQ(kv.MissingBlocks(r, 1), 2);
  Compute(kv, r);
  EXPECT_EQ(pool.Stats().used, 9);
  kv.Free(r);
  EXPECT_EQ(pool.Stats().used, 0);
}

TEST(KvCacheManagerTest, APrefixHitNeedsTheWindowPagesItsWindowReaches) {
  BlockPool pool(10, nullptr);
  KvCacheManager kv(pool, 4, "m", true, {0, 8});
  Request a = MakeRequest(1, Tokens(20));
  Compute(kv, a);
  kv.Free(a);
  // Cached: every group-0 page and every window page (blocks 0-2 given back
  // first, so least recently used).
  Request b = MakeRequest(2, Tokens(24));
  EXPECT_EQ(kv.BlocksToAdmit(b, 4), 5 + 2 + 2);  // 5 group-0 and 2 window pages off the free list; a new block
  EXPECT_EQ(kv.AcquireCachedPrefix(b), 20);
  EXPECT_EQ(b.block_table,
            (std::vector<BlockId>{a.block_table[0], kFreed, a.block_table[2], kFreed, a.block_table[4], kFreed,
                                  a.block_table[6], b.block_table[7], a.block_table[8], b.block_table[9]}));
  EXPECT_NE(b.block_table[7], kFreed);
  kv.Free(b);
  EXPECT_EQ(pool.Stats().used, 0);

  // The least recently used pages are the window pages of blocks 0-2 (given
  // back as the window passed), then block 4's (b gave its table back last
  // first). Evict those four: group 0 still holds all five blocks, but no
  // hit has its window's pages (5 lacks block 4's, 4 block 2's, 2 and 1
  // blocks 1's and 0's).
  Request filler = MakeRequest(3, std::vector<model::TokenId>(8, 77));
  ASSERT_TRUE(kv.Allocate(filler, 8));  // two blocks: four pages
  Request c = MakeRequest(4, Tokens(24));
  EXPECT_EQ(kv.BlocksToAdmit(c, 24), 6 * 2);
  EXPECT_EQ(kv.AcquireCachedPrefix(c), 0);
  EXPECT_TRUE(c.block_table.empty());
  EXPECT_EQ(pool.Stats().used, 4);
}

// A disk that holds some hashes and records the loads asked of it.
class FakeDisk : public LowerKvTiers {
 public:
  std::optional<BlockId> LoadFromHost(const BlockHash&) override { return std::nullopt; }
  bool InHost(const BlockHash&) const override { return false; }
  void TouchHost(const BlockHash&) override {}
  bool OnDiskOnly(const BlockHash& hash) const override {
    return std::find(held.begin(), held.end(), hash) != held.end();
  }
  void StartDiskLoad(RequestId, std::vector<BlockHash> hashes) override { loads.push_back(std::move(hashes)); }
  bool has_disk() const override { return true; }
  bool loads_in_flight() const override { return in_flight; }

  std::vector<BlockHash> held;
  std::vector<std::vector<BlockHash>> loads;
  bool in_flight = false;
};

// With window pages on disk, a hit the disk holds is one load of group 0's
// pages and the window's pages of its end; the request waits holding
// nothing, and a window page the disk lacks shortens the hit it loads.
TEST(KvCacheManagerTest, AWindowedHitOnDiskIsOneLoadOfGroupZeroAndTheWindowsPages) {
  BlockPool pool(16, nullptr);
  KvCacheManager kv(pool, 4, "m", true, {0, 8});
  FakeDisk disk;
  kv.set_lower_tiers(&disk);
  const std::vector<BlockHash> blocks = HashFullBlocks(RootBlockHash("m", ""), Tokens(20), 4);
  ASSERT_EQ(blocks.size(), 5u);
  disk.held = blocks;
  for (const BlockHash& b : blocks) disk.held.push_back(KvCacheManager::PageHash(b, 1));

  // 21 tokens: a hit of at most 5 blocks (the last token is computed);
  // its window (from key 13) reaches blocks 3 and 4.
  Request r = MakeRequest(1, Tokens(21));
  EXPECT_EQ(kv.BlocksToAdmit(r, 8), std::nullopt) << "admitting it starts a load";
  disk.in_flight = true;
  EXPECT_EQ(kv.AcquireCachedPrefix(r), 0);
  EXPECT_TRUE(r.kv_awaits_disk) << "one load at a time";
  EXPECT_TRUE(disk.loads.empty());
  disk.in_flight = false;
  EXPECT_EQ(kv.AcquireCachedPrefix(r), 0);
  EXPECT_TRUE(r.kv_loading);
  EXPECT_TRUE(r.block_table.empty());
  ASSERT_EQ(disk.loads.size(), 1u);
  // The window's pages first: a load gives its pages back last first.
  std::vector<BlockHash> expected = {KvCacheManager::PageHash(blocks[3], 1), KvCacheManager::PageHash(blocks[4], 1)};
  expected.insert(expected.end(), blocks.begin(), blocks.end());
  EXPECT_EQ(disk.loads[0], expected);
  // Tried once per admission: the next lookup takes what the device has.
  EXPECT_TRUE(kv.BlocksToAdmit(r, 8).has_value());

  // Block 4's window page gone: the longest hit with its window is 4
  // blocks (window from key 9: blocks 2 and 3).
  std::erase(disk.held, KvCacheManager::PageHash(blocks[4], 1));
  Request s = MakeRequest(2, Tokens(21));
  EXPECT_EQ(kv.AcquireCachedPrefix(s), 0);
  ASSERT_EQ(disk.loads.size(), 2u);
  expected = {KvCacheManager::PageHash(blocks[2], 1),
              KvCacheManager::PageHash(blocks[3], 1),
              blocks[0],
              blocks[1],
              blocks[2],
              blocks[3]};
  EXPECT_EQ(disk.loads[1], expected);
}

// Without room for the load and the rest of the prompt, nothing is loaded:
// the request computes its prefix instead of waiting.
TEST(KvCacheManagerTest, AWindowedHitOnDiskIsNotLoadedWithoutRoomForIt) {
  BlockPool pool(12, nullptr);
  KvCacheManager kv(pool, 4, "m", true, {0, 8});
  FakeDisk disk;
  kv.set_lower_tiers(&disk);
  for (const BlockHash& b : HashFullBlocks(RootBlockHash("m", ""), Tokens(20), 4)) {
    disk.held.push_back(b);
    disk.held.push_back(KvCacheManager::PageHash(b, 1));
  }
  Request filler = MakeRequest(1, std::vector<model::TokenId>(12, 77));
  ASSERT_TRUE(kv.Allocate(filler, 12));  // 3 blocks: 6 pages, 6 left
  Request r = MakeRequest(2, Tokens(21));
  // 7 pages to load, and the prompt's sixth block after them: 8 > 6.
  EXPECT_EQ(kv.AcquireCachedPrefix(r), 0);
  EXPECT_FALSE(r.kv_loading);
  EXPECT_TRUE(disk.loads.empty());
  kv.Free(filler);
  EXPECT_EQ(kv.AcquireCachedPrefix(r), 0);
  EXPECT_TRUE(r.kv_loading) << "with the pool free the load starts";
  ASSERT_EQ(disk.loads.size(), 1u);
  EXPECT_EQ(disk.loads[0].size(), 7u);
}

TEST(KvCacheManagerTest, WindowPagesGiveWayToBlocksPastTheTokensAndCountInBlocksToAdmit) {
  BlockPool pool(32, nullptr);
  KvCacheManager kv(pool, 4, "m", true, {0, 8, 8});
  Request r = MakeRequest(1, Tokens(18));
  const int32_t need = *kv.BlocksToAdmit(r, 18);
  const int32_t free_before = pool.num_free();
  EXPECT_EQ(kv.AcquireCachedPrefix(r), 0);
  ASSERT_TRUE(kv.Allocate(r, 18 + 4));                 // room for four drafted tokens: 6 blocks
  EXPECT_EQ(free_before - pool.num_free(), need + 3);  // 5 blocks x 3 groups for the prompt, one more for drafts
  r.num_computed_tokens = 18;
  kv.CommitFullBlocks(r);
  kv.ReleaseBlocksPastTokens(r);  // the drafts were rejected
  EXPECT_EQ(kv.HeldBlocks(r), 5);
  EXPECT_EQ(pool.Stats().used, 5 + 2 * 3);  // window from key 11: blocks 2-4 in each window group
  kv.Free(r);
  EXPECT_EQ(pool.Stats().used, 0);
}

}  // namespace
}  // namespace kvfleet::engine
