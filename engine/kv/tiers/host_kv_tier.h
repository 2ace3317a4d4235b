// The host-memory KV tier: a fixed number of block-sized slots in one
// allocation, a hash → slot map and least-recently-used order. Blocks land
// here when the device cache evicts them and are copied back on a hit.
//
// Insert hands back the slot to fill and, when the tier is full, the least
// recently used block it pushed out: its bytes stay readable in that same
// slot until the caller fills it, so the caller can pass them further down
// (to the disk tier) without another copy.
//
// Thread-safety: none; the engine thread owns it.
//
//   HostKvTier host(/*capacity_blocks=*/1024, block_bytes);
//   HostKvTier::Insertion ins = host.Insert(hash, parent);
//   if (ins.evicted) disk.Write(ins.evicted->hash, ins.evicted->parent, ins.slot);
//   executor.CopyKvBlockOut(block, ins.slot);
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "common/block_hash.h"

namespace kvfleet::engine {

class HostKvTier {
 public:
  struct Entry {
    BlockHash hash;
    std::optional<BlockHash> parent;
    // false: a sliding-window page under a derived hash (BlockPool::Commit's
    // publish): never announced, and written to disk marked so.
    bool published = true;
  };
  struct Insertion {
    std::span<uint8_t> slot;       // to be filled with the block's bytes
    std::optional<Entry> evicted;  // its bytes are `slot` until filled
  };

  // capacity_blocks >= 2 (a load touches its block before the eviction it
  // may cause, so two slots always keep it). `storage` holds
  // capacity_blocks × block_bytes bytes (null: allocated here).
  HostKvTier(int64_t capacity_blocks, int64_t block_bytes, std::shared_ptr<uint8_t> storage = nullptr);

  int64_t capacity_blocks() const { return capacity_; }
  int64_t num_blocks() const { return static_cast<int64_t>(index_.size()); }
  int64_t block_bytes() const { return block_bytes_; }

  bool Contains(const BlockHash& hash) const { return index_.contains(hash); }
  // The block's bytes, now the most recently used; empty on a miss.
  std::span<const uint8_t> Touch(const BlockHash& hash);
  std::optional<BlockHash> ParentOf(const BlockHash& hash) const;
  bool IsPublished(const BlockHash& hash) const;
  // A slot for `hash` (CHECK: not present), the least recently used block
  // evicted when full.
  Insertion Insert(const BlockHash& hash, const std::optional<BlockHash>& parent, bool published = true);
  // Drops a block (a failed fill); no-op when absent.
  void Erase(const BlockHash& hash);
  // Every block held, least recently used first.
  std::vector<Entry> Entries() const;

 private:
  struct Slot {
    Entry entry;
    int64_t index;
  };
  std::span<uint8_t> SlotBytes(int64_t index) {
    return {storage_.get() + index * block_bytes_, static_cast<size_t>(block_bytes_)};
  }

  int64_t capacity_;
  int64_t block_bytes_;
  std::shared_ptr<uint8_t> storage_;
  std::list<Slot> lru_;  // least recently used first
  absl::flat_hash_map<BlockHash, std::list<Slot>::iterator> index_;
  std::vector<int64_t> free_slots_;
};

}  // namespace kvfleet::engine
