#include "engine/kv/tiers/host_kv_tier.h"

#include "common/check.h"

namespace kvfleet::engine {

HostKvTier::HostKvTier(int64_t capacity_blocks, int64_t block_bytes, std::shared_ptr<uint8_t> storage)
    : capacity_(capacity_blocks), block_bytes_(block_bytes), storage_(std::move(storage)) {
  CHECK_GE(capacity_blocks, 2) << "a host KV tier needs at least two blocks";
  CHECK_GT(block_bytes, 0);
  if (storage_ == nullptr) {
    storage_ = std::shared_ptr<uint8_t>(new uint8_t[static_cast<size_t>(capacity_blocks * block_bytes)],
                                        std::default_delete<uint8_t[]>());
  }
  free_slots_.reserve(static_cast<size_t>(capacity_blocks));
  for (int64_t i = capacity_blocks - 1; i >= 0; --i) free_slots_.push_back(i);
}

std::span<const uint8_t> HostKvTier::Touch(const BlockHash& hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) return {};
  lru_.splice(lru_.end(), lru_, it->second);
  return SlotBytes(it->second->index);
}

std::optional<BlockHash> HostKvTier::ParentOf(const BlockHash& hash) const {
  const auto it = index_.find(hash);
  CHECK(it != index_.end()) << "ParentOf a block the host tier does not hold";
  return it->second->entry.parent;
}

bool HostKvTier::IsPublished(const BlockHash& hash) const {
  const auto it = index_.find(hash);
  CHECK(it != index_.end()) << "IsPublished of a block the host tier does not hold";
  return it->second->entry.published;
}

HostKvTier::Insertion HostKvTier::Insert(const BlockHash& hash, const std::optional<BlockHash>& parent,
                                         bool published) {
  CHECK(!index_.contains(hash)) << "block " << hash.ToHex() << " inserted twice into the host tier";
  Insertion out;
  int64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    Slot& victim = lru_.front();
    out.evicted = victim.entry;
    slot = victim.index;
    index_.erase(victim.entry.hash);
    lru_.pop_front();
  }
  lru_.push_back({.entry = {.hash = hash, .parent = parent, .published = published}, .index = slot});
  index_[hash] = std::prev(lru_.end());
  out.slot = SlotBytes(slot);
  return out;
}

void HostKvTier::Erase(const BlockHash& hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) return;
  free_slots_.push_back(it->second->index);
  lru_.erase(it->second);
  index_.erase(it);
}

std::vector<HostKvTier::Entry> HostKvTier::Entries() const {
  std::vector<Entry> out;
  out.reserve(lru_.size());
  for (const Slot& s : lru_) out.push_back(s.entry);
  return out;
}

}  // namespace kvfleet::engine
