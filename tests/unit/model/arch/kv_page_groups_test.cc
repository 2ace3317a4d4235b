#include "model/arch/kv_page_groups.h"

#include <gtest/gtest.h>

namespace kvfleet::model {
namespace {

ModelConfig WithWindows(std::vector<int64_t> windows) {
  ModelConfig c;
  for (int64_t w : windows) c.layers.push_back({.window = w});
  c.num_layers = static_cast<int64_t>(windows.size());
  return c;
}

// Gemma 3 270M: layers 5, 11 and 17 global, the other 15 windowed.
ModelConfig Gemma270m() {
  std::vector<int64_t> w(18, 512);
  for (int i = 5; i < 18; i += 6) w[static_cast<size_t>(i)] = 0;
  return WithWindows(w);
}

TEST(KvPageGroupsTest, GemmaSplitsIntoOneGlobalAndFiveWindowGroupsOfThreeLayers) {
  const KvPageGroups g = KvPageGroupsFor(Gemma270m(), true);
  EXPECT_EQ(g.layers_per_page, 3);
  EXPECT_EQ(g.group_window, (std::vector<int64_t>{0, 512, 512, 512, 512, 512}));
  EXPECT_TRUE(g.frees_window_blocks());
  // Each (group, slot) names exactly one layer, of the group's window.
  std::vector<int> seen(18, 0);
  for (int l = 0; l < 18; ++l) {
    const int32_t group = g.layer_group[static_cast<size_t>(l)], slot = g.layer_slot[static_cast<size_t>(l)];
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, 3);
    EXPECT_EQ(g.group_window[static_cast<size_t>(group)], l % 6 == 5 ? 0 : 512) << "layer " << l;
    ++seen[static_cast<size_t>(group * 3 + slot)];
  }
  EXPECT_EQ(seen, std::vector<int>(18, 1));
}

TEST(KvPageGroupsTest, OneGroupWhenOffOrNothingToFree) {
  for (const auto& [config, free] : {std::pair{Gemma270m(), false}, std::pair{WithWindows({0, 0, 0}), true},
                                     std::pair{WithWindows({64, 64}), true}}) {
    const KvPageGroups g = KvPageGroupsFor(config, free);
    EXPECT_EQ(g.num_groups(), 1);
    EXPECT_EQ(g.layers_per_page, config.num_layers);
    EXPECT_FALSE(g.frees_window_blocks());
    for (int32_t l = 0; l < config.num_layers; ++l) EXPECT_EQ(g.layer_slot[static_cast<size_t>(l)], l);
  }
}

TEST(KvPageGroupsTest, LayerCountsWithoutACommonDivisorGetOneLayerPages) {
  const KvPageGroups g = KvPageGroupsFor(WithWindows({0, 0, 8, 8, 8}), true);
  EXPECT_EQ(g.layers_per_page, 1);
  EXPECT_EQ(g.group_window, (std::vector<int64_t>{0, 0, 8, 8, 8}));
}

TEST(KvPageGroupsTest, PagesForSequenceKeepOnlyTheWindowsBlocks) {
  const KvPageGroups g = KvPageGroupsFor(Gemma270m(), true);
  // 100 tokens: 7 blocks in every group.
  EXPECT_EQ(g.PagesForSequence(100, 16), 6 * 7);
  // 4,000 tokens: 250 blocks in the global group, ⌈511 / 16⌉ + 1 = 33 in each window group.
  EXPECT_EQ(g.PagesForSequence(4000, 16), 250 + 5 * 33);
  EXPECT_EQ(KvPageGroupsFor(Gemma270m(), false).PagesForSequence(4000, 16), 250);
}

}  // namespace
}  // namespace kvfleet::model
