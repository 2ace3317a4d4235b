// A tree of guesses from per-depth candidates, best first: what a proposer
// whose guesses at one depth do not depend on the guesses before them
// (Medusa-style draft heads) offers for tree verification.
//
// A node's worth is the product of its path's probabilities: the chance
// that verification keeps it, if the candidates' probabilities are right.
// Nodes are added best first, so the first n nodes of the tree are the n
// most likely to be kept, each after its parent, with non-increasing worths
// (what DraftSlot::parents and ::worths promise).
//
//   DraftTree tree = BestFirstTree(candidates_per_depth, /*max_nodes=*/16);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/token_id.h"

namespace kvfleet::engine::spec {

struct TreeCandidate {
  model::TokenId token;
  double probability;
};

struct DraftTree {
  std::vector<model::TokenId> tokens;
  std::vector<int32_t> parents;  // -1: the pending token
  std::vector<double> worths;
};

// per_depth[d]: the candidates for the guess d + 1 places after the pending
// token, most likely first. A depth without candidates ends every path.
DraftTree BestFirstTree(std::span<const std::vector<TreeCandidate>> per_depth, int32_t max_nodes);

}  // namespace kvfleet::engine::spec
