#include "kernels/cuda/attention_plan.h"

#include <algorithm>

namespace kvfleet::kernels::cuda {

bool PlanAttention(const int32_t* positions, const int32_t* chunk_starts, int32_t num_chunks, int64_t group,
                   int64_t workspace_partials, AttentionPlan* plan, const uint64_t* tree_masks) {
  plan->items.clear();
  plan->groups.clear();
  plan->partial_offsets.assign(chunk_starts[num_chunks], 0);
  plan->max_group_partials = 0;
  const int32_t tile_tokens = TileTokens(group);
  AttentionGroup current{};
  int64_t group_partials = 0;
  const auto close_group = [&] {
    if (current.num_items == 0) return;
    plan->groups.push_back(current);
    plan->max_group_partials = std::max(plan->max_group_partials, group_partials);
    current = {.first_item = static_cast<int32_t>(plan->items.size()),
               .first_token = current.first_token + current.num_tokens};
    group_partials = 0;
  };
  for (int32_t c = 0; c < num_chunks; ++c) {
    const bool tree = tree_masks != nullptr && tree_masks[chunk_starts[c]] != 0;
    const int32_t chunk_tile = tree ? 1 : tile_tokens;
    for (int32_t t0 = chunk_starts[c]; t0 < chunk_starts[c + 1]; t0 += chunk_tile) {
      const int32_t n = std::min(chunk_tile, chunk_starts[c + 1] - t0);
      int64_t tile_partials = 0;
      for (int32_t t = t0; t < t0 + n; ++t) tile_partials += PartitionsFor(positions[t]);
      if (tile_partials > workspace_partials) {
        plan->items.clear();
        plan->groups.clear();
        return false;
      }
      // Tiles never straddle groups; a group holds at least one tile.
      if (current.num_items > 0 && group_partials + tile_partials > workspace_partials) close_group();
      for (int32_t t = t0; t < t0 + n; ++t) {
        plan->partial_offsets[t] = group_partials;
        group_partials += PartitionsFor(positions[t]);
      }
      for (int32_t part = 0; part < PartitionsFor(positions[t0 + n - 1]); ++part) {
        plan->items.push_back({.first_token = t0, .tokens = n, .partition = part});
        ++current.num_items;
      }
      current.num_tokens += n;
    }
  }
  close_group();
  return true;
}

}  // namespace kvfleet::kernels::cuda
