#include "model/arch/kv_page_groups.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace kvfleet::model {

bool KvPageGroups::frees_window_blocks() const {
  for (int64_t w : group_window) {
    if (w > 0) return num_groups() > 1;
  }
  return false;
}

int64_t KvPageGroups::PagesForSequence(int64_t tokens, int64_t block_size) const {
  const int64_t blocks = (tokens + block_size - 1) / block_size;
  int64_t pages = 0;
  for (int64_t w : group_window) {
    // Positions p − w + 1 .. p reach at most ⌈(w − 1) / block_size⌉ + 1 blocks.
    pages += w > 0 && frees_window_blocks() ? std::min(blocks, (w - 1 + block_size - 1) / block_size + 1) : blocks;
  }
  return pages;
}

KvPageGroups KvPageGroupsFor(const ModelConfig& config, bool free_window_blocks) {
  const int32_t layers = static_cast<int32_t>(config.layers.size());
  // Layer indices by window, full attention (0) first.
  std::map<int64_t, std::vector<int32_t>> by_window;
  for (int32_t l = 0; l < layers; ++l) by_window[config.layers[static_cast<size_t>(l)].window].push_back(l);

  KvPageGroups g;
  g.layer_group.assign(static_cast<size_t>(layers), 0);
  g.layer_slot.resize(static_cast<size_t>(layers));
  // One group when freeing is off, when nothing is windowed, and when no
  // layer attends to every key (group 0, whose hashes the cluster sees,
  // must keep every block; Mistral-style models keep them all, as before).
  if (!free_window_blocks || by_window.size() < 2 || !by_window.contains(0)) {
    g.layers_per_page = layers;
    g.group_window = {0};
    std::iota(g.layer_slot.begin(), g.layer_slot.end(), 0);
    return g;
  }
  int32_t per_page = 0;
  for (const auto& [window, members] : by_window) per_page = std::gcd(per_page, static_cast<int32_t>(members.size()));
  g.layers_per_page = per_page;
  for (const auto& [window, members] : by_window) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (i % static_cast<size_t>(per_page) == 0) g.group_window.push_back(window);
      g.layer_group[static_cast<size_t>(members[i])] = g.num_groups() - 1;
      g.layer_slot[static_cast<size_t>(members[i])] = static_cast<int32_t>(i % static_cast<size_t>(per_page));
    }
  }
  return g;
}

}  // namespace kvfleet::model
