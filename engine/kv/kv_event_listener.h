// Hooks through which the block pool reports which KV blocks it holds, for
// the cachemanager (the worker's gRPC layer turns them into KV events). No
// transport here: the engine only calls an interface.
//
// Calls come from the engine thread, in the order the pool changes.
#pragma once

#include <optional>
#include <span>

#include "common/block_hash.h"
#include "common/kv_tier.h"

namespace kvfleet::engine {

// A cached block as a snapshot lists it: its hash, and the hash of the
// block before it in its sequence (none for a sequence's first block), so
// the cluster's index knows its chains after a snapshot as after stores.
struct CachedBlock {
  BlockHash hash;
  std::optional<BlockHash> parent;
  bool operator==(const CachedBlock&) const = default;
};

class KvEventListener {
 public:
  virtual ~KvEventListener() = default;
  // A full block's KV is now cached under `hash`; `parent` is the hash of the
  // block before it in its sequence (none for a sequence's first block).
  virtual void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) = 0;
  // The block cached under `hash` was evicted; its contents are gone.
  virtual void OnBlockRemoved(const BlockHash& hash) = 0;
  // The block's best copy is now in `tier`, below the device: its device
  // copy was evicted into a lower tier, or its lower copy moved further
  // down. A listener that knows no tiers sees a removal (the device lost it).
  virtual void OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) {
    OnBlockRemoved(hash);
  }
  // Every cached block was dropped at once.
  virtual void OnAllCleared() = 0;
  // Answers Engine::RequestKvSnapshot: every block cached right now, in the
  // same order as the other calls, so it supersedes everything before it.
  // With lower tiers, OnBlockMoved calls for their blocks follow it.
  virtual void OnSnapshot(std::span<const CachedBlock> blocks) {}
};

}  // namespace kvfleet::engine
