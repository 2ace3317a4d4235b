#include "engine/kv/tiers/host_kv_tier.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvfleet::engine {
namespace {

BlockHash H(uint64_t i) { return {.hi = i, .lo = i * 31}; }

void Fill(std::span<uint8_t> slot, uint8_t v) { std::fill(slot.begin(), slot.end(), v); }

TEST(HostKvTierTest, KeepsBytesAndParentsAndEvictsLeastRecentlyUsed) {
  HostKvTier tier(3, 8);
  for (uint64_t i = 1; i <= 3; ++i) {
    HostKvTier::Insertion ins = tier.Insert(H(i), i == 1 ? std::nullopt : std::optional<BlockHash>(H(i - 1)));
    EXPECT_FALSE(ins.evicted.has_value());
    Fill(ins.slot, static_cast<uint8_t>(i));
  }
  EXPECT_EQ(tier.num_blocks(), 3);
  EXPECT_EQ(tier.ParentOf(H(2)), H(1));
  EXPECT_FALSE(tier.ParentOf(H(1)).has_value());
  // Touching 1 makes 2 the least recently used.
  ASSERT_EQ(tier.Touch(H(1)).size(), 8u);
  EXPECT_EQ(tier.Touch(H(1))[0], 1);
  HostKvTier::Insertion ins = tier.Insert(H(4), H(3));
  ASSERT_TRUE(ins.evicted.has_value());
  EXPECT_EQ(ins.evicted->hash, H(2));
  EXPECT_EQ(ins.evicted->parent, H(1));
  // The evicted block's bytes are the slot's until it is filled.
  EXPECT_EQ(ins.slot[0], 2);
  Fill(ins.slot, 4);
  EXPECT_FALSE(tier.Contains(H(2)));
  EXPECT_TRUE(tier.Touch(H(2)).empty());
  EXPECT_EQ(tier.Touch(H(4))[7], 4);
  EXPECT_EQ(tier.Touch(H(3))[0], 3);
  std::vector<BlockHash> order;
  for (const HostKvTier::Entry& e : tier.Entries()) order.push_back(e.hash);
  EXPECT_EQ(order, (std::vector<BlockHash>{H(1), H(4), H(3)}));
}

TEST(HostKvTierTest, EraseFreesItsSlot) {
  HostKvTier tier(2, 4);
  tier.Insert(H(1), std::nullopt);
  tier.Insert(H(2), H(1));
  tier.Erase(H(1));
  tier.Erase(H(9));  // absent: nothing happens
  EXPECT_EQ(tier.num_blocks(), 1);
  EXPECT_FALSE(tier.Insert(H(3), H(2)).evicted.has_value());
  EXPECT_TRUE(tier.Insert(H(4), std::nullopt).evicted.has_value());
}

// A window page's entry says it is unpublished, in Entries and when it is
// pushed out, so the tier manager neither announces it nor writes it to disk.
TEST(HostKvTierTest, UnpublishedEntriesSaySo) {
  HostKvTier tier(2, 8);
  tier.Insert(H(1), std::nullopt, /*published=*/false);
  tier.Insert(H(2), H(1));
  EXPECT_FALSE(tier.IsPublished(H(1)));
  EXPECT_TRUE(tier.IsPublished(H(2)));
  EXPECT_FALSE(tier.Entries()[0].published);
  HostKvTier::Insertion ins = tier.Insert(H(3), H(2));
  ASSERT_TRUE(ins.evicted.has_value());
  EXPECT_EQ(ins.evicted->hash, H(1));
  EXPECT_FALSE(ins.evicted->published);
}

TEST(HostKvTierDeathTest, RefusesUnderTwoBlocksAndDoubleInserts) {
  EXPECT_DEATH(HostKvTier(1, 8), "at least two blocks");
  HostKvTier tier(2, 8);
  tier.Insert(H(1), std::nullopt);
  EXPECT_DEATH(tier.Insert(H(1), std::nullopt), "inserted twice");
}

}  // namespace
}  // namespace kvfleet::engine
