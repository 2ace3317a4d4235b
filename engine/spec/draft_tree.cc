#include "engine/spec/draft_tree.h"

#include <queue>

namespace kvfleet::engine::spec {

DraftTree BestFirstTree(std::span<const std::vector<TreeCandidate>> per_depth, int32_t max_nodes) {
  // A frontier entry: the rank-th candidate of `depth` under `parent`.
  struct Open {
    double worth;
    int32_t parent;
    int32_t depth;
    int32_t rank;
    bool operator<(const Open& o) const { return worth < o.worth; }
  };
  DraftTree tree;
  std::priority_queue<Open> frontier;
  const auto offer = [&](double parent_worth, int32_t parent, int32_t depth, int32_t rank) {
    if (depth >= static_cast<int32_t>(per_depth.size())) return;
    const std::vector<TreeCandidate>& c = per_depth[static_cast<size_t>(depth)];
    if (rank >= static_cast<int32_t>(c.size())) return;
    const double worth = parent_worth * c[static_cast<size_t>(rank)].probability;
    if (worth > 0.0) frontier.push({worth, parent, depth, rank});
  };
  offer(1.0, -1, 0, 0);
  while (!frontier.empty() && static_cast<int32_t>(tree.tokens.size()) < max_nodes) {
    const Open best = frontier.top();
    frontier.pop();
    const int32_t node = static_cast<int32_t>(tree.tokens.size());
    tree.tokens.push_back(per_depth[static_cast<size_t>(best.depth)][static_cast<size_t>(best.rank)].token);
    tree.parents.push_back(best.parent);
    tree.worths.push_back(best.worth);
    // Its next sibling, and its own first child; each is worth no more
    // than this node, so the order stays best first.
    const double parent_worth = best.parent < 0 ? 1.0 : tree.worths[static_cast<size_t>(best.parent)];
    offer(parent_worth, best.parent, best.depth, best.rank + 1);
    offer(best.worth, node, best.depth + 1, 0);
  }
  return tree;
}

}  // namespace kvfleet::engine::spec
