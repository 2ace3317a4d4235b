// The CUDA attention's host plan: every (token, partition) pair gets exactly
// one work item and one partial row, tiles never cross chunks or groups, and
// each group's partials fit the workspace.
#include "kernels/cuda/attention_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace kvfleet::kernels::cuda {
namespace {

struct Batch {
  std::vector<int32_t> positions, chunk_starts{0};
  void AddChunk(int32_t start, int32_t n) {
    for (int32_t i = 0; i < n; ++i) positions.push_back(start + i);
    chunk_starts.push_back(static_cast<int32_t>(positions.size()));
  }
  int32_t chunks() const { return static_cast<int32_t>(chunk_starts.size()) - 1; }
};

TEST(AttentionPlanTest, EveryTokenPartitionPairIsCoveredOnceWithinTheWorkspace) {
  Batch b;
  b.AddChunk(0, 600);   // a prefill crossing two partition boundaries
  b.AddChunk(1000, 1);  // a decode token in its fourth partition
  b.AddChunk(255, 3);   // a verify chunk straddling a boundary
  b.AddChunk(7, 1);
  for (const int64_t group : {1, 3, 4, 16}) {
    const int64_t workspace = MinWorkspacePartials(group, 4096) + 50;
    AttentionPlan plan;
    ASSERT_TRUE(PlanAttention(b.positions.data(), b.chunk_starts.data(), b.chunks(), group, workspace, &plan));
    std::map<std::pair<int32_t, int32_t>, int> covered;  // (token, partition) → items covering it
    int32_t expected_token = 0;
    for (const AttentionGroup& g : plan.groups) {
      EXPECT_EQ(g.first_token, expected_token) << "groups are consecutive";
      expected_token += g.num_tokens;
      int64_t partials = 0;
      std::set<int64_t> rows;
      for (int32_t t = g.first_token; t < g.first_token + g.num_tokens; ++t) {
        for (int32_t p = 0; p < PartitionsFor(b.positions[t]); ++p) rows.insert(plan.partial_offsets[t] + p);
        partials += PartitionsFor(b.positions[t]);
      }
      EXPECT_EQ(static_cast<int64_t>(rows.size()), partials) << "partial rows are distinct";
      EXPECT_LE(*rows.rbegin() + 1, workspace) << "and inside the workspace";
      for (int32_t i = g.first_item; i < g.first_item + g.num_items; ++i) {
        const AttentionWorkItem& item = plan.items[i];
        EXPECT_GE(item.first_token, g.first_token);
        EXPECT_LE(item.first_token + item.tokens, g.first_token + g.num_tokens);
        EXPECT_LE(item.tokens, TileTokens(group));
        // A tile's tokens are one chunk's, consecutive positions.
        EXPECT_EQ(b.positions[item.first_token + item.tokens - 1], b.positions[item.first_token] + item.tokens - 1);
        for (int32_t t = item.first_token; t < item.first_token + item.tokens; ++t) {
          if (item.partition < PartitionsFor(b.positions[t])) ++covered[{t, item.partition}];
        }
      }
    }
    EXPECT_EQ(expected_token, static_cast<int32_t>(b.positions.size()));
    for (int32_t t = 0; t < static_cast<int32_t>(b.positions.size()); ++t) {
      for (int32_t p = 0; p < PartitionsFor(b.positions[t]); ++p) {
        EXPECT_EQ((covered[{t, p}]), 1) << "token " << t << " partition " << p << " group " << group;
      }
    }
  }
}

TEST(AttentionPlanTest, DecodeTokensAreTilesOfOneAndPrefillSharesTiles) {
  Batch b;
  b.AddChunk(300, 1);
  b.AddChunk(0, 20);
  AttentionPlan plan;
  ASSERT_TRUE(PlanAttention(b.positions.data(), b.chunk_starts.data(), b.chunks(), /*group=*/4, 1 << 20, &plan));
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.items[0].tokens, 1);  // the decode token, partition 0 ...
  EXPECT_EQ(plan.items[1].tokens, 1);  // ... and 1
  EXPECT_EQ(plan.items[2].tokens, 4);  // 16 rows / 4 heads per KV head
  EXPECT_EQ(plan.items.size(), 2u + 5u);
}

TEST(AttentionPlanTest, ASmallWorkspaceSplitsGroupsAndATooSmallOneIsRefused) {
  Batch b;
  for (int i = 0; i < 40; ++i) b.AddChunk(2000 + i, 1);  // 40 decode tokens of 8 partitions each
  AttentionPlan plan;
  ASSERT_TRUE(PlanAttention(b.positions.data(), b.chunk_starts.data(), b.chunks(), 1, 8 * 10, &plan));
  EXPECT_EQ(plan.groups.size(), 4u);
  EXPECT_EQ(plan.max_group_partials, 80);
  EXPECT_FALSE(PlanAttention(b.positions.data(), b.chunk_starts.data(), b.chunks(), 1, 7, &plan));
  EXPECT_TRUE(plan.groups.empty());
}

}  // namespace
}  // namespace kvfleet::kernels::cuda
