// How a model's layers share KV pages, so that layers with a sliding window
// can give back the blocks their window has passed while full-attention
// layers keep every block.
//
// A page is one block of `block_size` tokens for `layers_per_page` layers.
// Layers are split into groups of exactly that many layers with the same
// window; each group has its own block table, and a request's logical block
// i takes one page per group. A windowed group's page for block i is freed
// once every position in block i is out of the window of every token still
// to come; a full group keeps it. Pages of every group are the same size, so
// one pool serves them all and no memory is split ahead of time (vLLM's
// hybrid allocator does the same).
//
// layers_per_page is the gcd of the layer counts of each window kind, so
// groups never mix kinds. Gemma 3 270M (15 local layers, 3 global): 3
// layers per page, 6 groups, group 0 global. A model whose layers all
// attend alike (or when freeing is off) has one group of every layer: a
// page is a whole block, as before.
//
// Group 0 is always full attention (a model without a full-attention layer
// keeps one group): its pages carry the block hashes the cluster sees, the
// other groups' pages hashes derived from them.
//
//   KvPageGroups g = KvPageGroupsFor(config, /*free_window_blocks=*/true);
//   int32_t table = g.layer_group[l], slot = g.layer_slot[l];
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch/model_config.h"

namespace kvfleet::model {

struct KvPageGroups {
  int32_t layers_per_page = 0;
  std::vector<int64_t> group_window;  // [groups] 0 (full attention) or the group's window
  std::vector<int32_t> layer_group;   // [layers] the group whose table the layer reads
  std::vector<int32_t> layer_slot;    // [layers] the layer's index within its page, [0, layers_per_page)

  int32_t num_groups() const { return static_cast<int32_t>(group_window.size()); }
  // Whether some group frees blocks behind its window.
  bool frees_window_blocks() const;
  // Pages a sequence of `tokens` holds while it decodes: every block in a
  // full group, in a windowed group those its window still reaches (a
  // prefill chunk holds its own blocks in every group until it ends).
  int64_t PagesForSequence(int64_t tokens, int64_t block_size) const;
};

KvPageGroups KvPageGroupsFor(const ModelConfig& config, bool free_window_blocks);

}  // namespace kvfleet::model
