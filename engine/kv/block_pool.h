// The pool of physical KV blocks: reference counts, the free list and the
// prefix cache (content hash → block). Blocks are integer ids; the executor
// holds their contents, this class only decides who uses which.
//
// A block is in exactly one of three states:
//   in use  — reference count > 0 (held by one or more requests);
//   cached  — count 0, holds a hash: its contents are reusable until evicted;
//   empty   — count 0, no hash.
// Cached and empty blocks sit in one free list in least-recently-released
// order. Allocate() takes the head (evicting its hash, if any); a cache hit
// on a cached block unlinks it from the middle in O(1). Every operation is
// O(1) except Clear().
//
// "No free block" is an expected outcome (Allocate returns nullopt), which
// the scheduler answers with preemption, not an error.
//
// Thread-safety: none; the engine thread owns the pool.
//
//   BlockPool pool(1024, &listener);
//   std::optional<BlockId> b = pool.Allocate();
//   pool.Commit(*b, hash, parent);   // the block is full: publish it
//   pool.Release(*b);                // now cached; reusable by hash
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/block_hash.h"
#include "common/ids.h"
#include "engine/kv/kv_event_listener.h"

namespace kvfleet::engine {

// Called by Allocate just before a cached block's contents are given up, so
// the lower KV tiers can copy them out first (engine/kv/tiers). `published`:
// whether the block was committed with events (Commit's publish).
class BlockEvictionHook {
 public:
  virtual ~BlockEvictionHook() = default;
  virtual void BeforeEvict(BlockId block, const BlockHash& hash, bool published) = 0;
};

struct BlockPoolStats {
  int32_t total = 0;
  int32_t used = 0;    // reference count > 0
  int32_t cached = 0;  // count 0 with a hash
  int32_t empty = 0;   // count 0 without a hash
  int32_t free() const { return cached + empty; }
};

class BlockPool {
 public:
  // listener may be null; it must outlive the pool.
  BlockPool(int32_t num_blocks, KvEventListener* listener);

  // Before any eviction; may be null; must outlive the pool.
  void set_eviction_hook(BlockEvictionHook* hook) { eviction_hook_ = hook; }

  int32_t num_blocks() const;
  // Blocks Allocate() can hand out right now (cached ones included).
  int32_t num_free() const;

  // Takes the least recently released free block with one reference. A
  // cached block loses its hash first (OnBlockRemoved). nullopt when none.
  std::optional<BlockId> Allocate();

  // The block cached under `hash`, with one more reference (unlinked from the
  // free list if it had none). nullopt on a miss. Moves nothing on a miss.
  std::optional<BlockId> AcquireCached(const BlockHash& hash);

  // Read-only cache probe: would AcquireCached hit?
  bool IsCached(const BlockHash& hash) const;
  // The block cached under `hash`, without taking a reference.
  std::optional<BlockId> FindCached(const BlockHash& hash) const;

  // One more reference to a block in use (CHECK: count > 0); free blocks
  // are taken only through Allocate() or AcquireCached().
  void Retain(BlockId block);
  // At count 0 the block goes to the tail of the free list, keeping its hash.
  // CHECK: count > 0.
  void Release(BlockId block);

  // The block (in use) is full: cache it under `hash` (OnBlockStored). If
  // another block already holds that hash, this one stays unhashed — the
  // first copy keeps serving hits. Committing a block again under the hash it
  // already holds does nothing; under another hash is a bug (CHECK).
  // publish = false caches it without listener events and leaves it out of
  // CachedBlocks (a sliding-window layer group's page, whose derived hash
  // means nothing to the cluster); the eviction hook is told so.
  void Commit(BlockId block, const BlockHash& hash, const std::optional<BlockHash>& parent, bool publish = true);

  // Drops every cached hash (OnAllCleared). No block may be in use (CHECK).
  void Clear();

  int32_t ref_count(BlockId block) const;
  std::optional<BlockHash> hash_of(BlockId block) const;
  // The parent it was committed with, and whether with events (meaningful
  // while hash_of is set).
  std::optional<BlockHash> parent_of(BlockId block) const;
  bool published(BlockId block) const;
  // Every published block the pool holds (in use or cached) with the parent
  // it was committed with, in no particular order. O(cached).
  std::vector<CachedBlock> CachedBlocks() const;
  BlockPoolStats Stats() const;
  // Stats() recomputed from every block's own state, ignoring the counters
  // Stats() keeps: O(blocks), for tests and audits of the accounting.
  BlockPoolStats Recount() const;

 private:
  static constexpr int32_t kNone = -1;

  void CheckId(BlockId block) const;
  // The intrusive free list: O(1) push at the tail and unlink anywhere.
  void PushTail(int32_t b);
  void Unlink(int32_t b);
  // Takes a free block (already unlinked) into use with one reference.
  void TakeIntoUse(int32_t b);

  KvEventListener* listener_;
  BlockEvictionHook* eviction_hook_ = nullptr;
  std::vector<int32_t> ref_counts_;
  std::vector<std::optional<BlockHash>> hashes_;
  std::vector<std::optional<BlockHash>> parents_;  // meaningful while hashes_[b] is set
  std::vector<bool> published_;                    // likewise
  // Free-list links by block id; kNone ends the list. Meaningful only for
  // blocks with reference count 0 (exactly the blocks on the list).
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  int32_t head_ = kNone;  // least recently released: evicted first
  int32_t tail_ = kNone;  // most recently released
  absl::flat_hash_map<BlockHash, BlockId> cache_;
  // Counters that keep Stats() O(1).
  int32_t num_free_ = 0;         // blocks on the free list
  int32_t num_free_cached_ = 0;  // blocks on the free list holding a hash
};

}  // namespace kvfleet::engine
