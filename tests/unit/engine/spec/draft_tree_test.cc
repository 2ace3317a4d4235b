// BestFirstTree: the first n nodes are the n likeliest to be kept, each
// after its parent, with their paths' probabilities as worths.
#include "engine/spec/draft_tree.h"

#include <gtest/gtest.h>

namespace kvfleet::engine::spec {
namespace {

TEST(DraftTreeTest, NodesComeBestFirstAfterTheirParents) {
  const std::vector<std::vector<TreeCandidate>> per_depth = {
      {{10, 0.6}, {11, 0.25}, {12, 0.1}},
      {{20, 0.5}, {21, 0.4}},
      {{30, 0.9}},
  };
  const DraftTree tree = BestFirstTree(per_depth, 6);
  // 0.6 (10), 0.3 (10-20), 0.27 (10-20-30), 0.25 (11), 0.24 (10-21), 0.216 (10-21-30)
  EXPECT_EQ(tree.tokens, (std::vector<model::TokenId>{10, 20, 30, 11, 21, 30}));
  EXPECT_EQ(tree.parents, (std::vector<int32_t>{-1, 0, 1, -1, 0, 4}));
  ASSERT_EQ(tree.worths.size(), 6u);
  EXPECT_DOUBLE_EQ(tree.worths[0], 0.6);
  EXPECT_DOUBLE_EQ(tree.worths[2], 0.6 * 0.5 * 0.9);
  for (size_t i = 1; i < tree.worths.size(); ++i) EXPECT_LE(tree.worths[i], tree.worths[i - 1]);
  // Any prefix is a tree: every parent comes before its child.
  for (size_t i = 0; i < tree.parents.size(); ++i) EXPECT_LT(tree.parents[i], static_cast<int32_t>(i));
}

TEST(DraftTreeTest, StopsAtTheBudgetAndAtADepthWithoutCandidates) {
  const std::vector<std::vector<TreeCandidate>> per_depth = {{{1, 0.9}, {2, 0.05}}, {}, {{3, 1.0}}};
  EXPECT_EQ(BestFirstTree(per_depth, 8).tokens, (std::vector<model::TokenId>{1, 2}));
  EXPECT_EQ(BestFirstTree(per_depth, 1).tokens, (std::vector<model::TokenId>{1}));
  EXPECT_TRUE(BestFirstTree({}, 8).tokens.empty());
  // A zero probability is never worth a node.
  EXPECT_EQ(BestFirstTree(std::vector<std::vector<TreeCandidate>>{{{1, 0.0}}}, 4).tokens.size(), 0u);
}

}  // namespace
}  // namespace kvfleet::engine::spec
