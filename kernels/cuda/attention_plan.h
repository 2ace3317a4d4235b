// The host half of the CUDA paged attention: which blocks run, computed
// once per forward pass from the batch's positions (every layer reuses it).
//
// The KV of a sequence is cut into partitions of kPartitionTokens positions
// with boundaries at absolute multiples of it, so a token's partitions do
// not depend on how its prompt was chunked. A work item is one tile of
// consecutive tokens of one chunk × one partition (× every KV head, the
// launch's second dimension): a decode token is a tile of one, a prefill or
// verify chunk is cut into tiles of up to kMaxTileRows / group tokens, so
// its tokens share each K/V load. Each (token, head, partition) writes one
// partial result; a second kernel combines a token's partials in partition
// order. A tree verify chunk's tokens are tiles of one (each reads its own
// path's keys: paged_kv.h). Work is split into groups whose partials fit the workspace
// (kernels launched per group), which bounds the workspace whatever the
// batch.
//
// Plain C++: tested without a GPU.
//
//   AttentionPlan plan;
//   PlanAttention(batch.positions.data(), batch.chunk_starts.data(), batch.num_chunks(), group, rows, &plan);
#pragma once

#include <cstdint>
#include <vector>

namespace kvfleet::kernels::cuda {

inline constexpr int32_t kPartitionTokens = 256;
inline constexpr int32_t kMaxTileRows = 16;  // query rows (tokens × heads of a KV head) one block holds

struct AttentionWorkItem {
  int32_t first_token = 0;  // index into the batch
  int32_t tokens = 0;       // consecutive tokens of one chunk
  int32_t partition = 0;
  int32_t unused = 0;       // 16 bytes: one vector load on the device
};

struct AttentionGroup {
  int32_t first_item = 0, num_items = 0;
  int32_t first_token = 0, num_tokens = 0;
};

struct AttentionPlan {
  std::vector<AttentionWorkItem> items;
  // [tokens]: the token's first partial row within its group, in units of
  // (partition); a partial's row is (partial_offsets[t] + partition) × heads + head.
  std::vector<int64_t> partial_offsets;
  std::vector<AttentionGroup> groups;
  int64_t max_group_partials = 0;  // (token, partition) pairs of the largest group
};

// The number of partitions up to a token at `position` (the plan's slots).
constexpr int32_t PartitionsFor(int32_t position) { return position / kPartitionTokens + 1; }

// The first partition a token at `position` reads under a sliding window
// (0 without one): the layers of one model share one plan, and a windowed
// layer's kernels skip the partitions before it.
constexpr int32_t FirstPartitionFor(int32_t position, int64_t window) {
  if (window <= 0 || position < window) return 0;
  return static_cast<int32_t>((position - window + 1) / kPartitionTokens);
}

// Tokens per tile of a multi-token chunk, for `group` query heads per KV head.
constexpr int32_t TileTokens(int64_t group) { return group >= kMaxTileRows ? 1 : static_cast<int32_t>(kMaxTileRows / group); }

// The (token, partition) pairs a workspace must hold so that any tile fits:
// a whole tile at the last position of the context.
constexpr int64_t MinWorkspacePartials(int64_t group, int64_t context_length) {
  return int64_t{TileTokens(group)} * PartitionsFor(static_cast<int32_t>(context_length - 1));
}

// Fills `plan` (reusing its capacity) for a batch; `workspace_partials` is how
// many (token, partition) pairs the workspace holds; `tree_masks` the batch's
// (null when no chunk is a tree). Clears and refills every field. False (and
// an empty plan) when one tile alone does not fit.
bool PlanAttention(const int32_t* positions, const int32_t* chunk_starts, int32_t num_chunks, int64_t group,
                   int64_t workspace_partials, AttentionPlan* plan, const uint64_t* tree_masks = nullptr);

}  // namespace kvfleet::kernels::cuda
