// The cluster's KV map: which worker holds which KV blocks, by content hash
// (common/block_hash.h), fed by the workers' KV events and asked by routers
// how much of a prompt's prefix each worker already holds. See README.md in
// this folder for the data structure, its memory and its complexity.
//
// What it owns: for every (worker slot, block hash) pair a worker reported as
// stored and has not removed since, two entries — the hash → holders map that
// answers FindOverlaps, and the worker's own hash set that makes Clear and
// ReplaceAll O(that worker's blocks) and BlockCount exact.
//
// Invariants (CheckInvariants() verifies them all):
//   - w is in holders(h) iff h is in w's map; holders(h) is in strictly
//     increasing slot order (no duplicates);
//   - no hash has an empty holder list (entries are erased when their last
//     holder goes, so memory follows what is cached, not what was ever seen);
//   - EntryCount() == sum of BlockCount(w) == sum of |holders(h)|;
//   - w's entry in holders(h) carries the tier w's own map gives h.
// Event semantics: Store is idempotent per (worker, hash); Remove ignores
// hashes the worker does not hold (events can repeat across a reconnect).
// A worker slot is a dense id from the registry (worker_slot.h); a negative
// or absurdly large slot is a bug (CHECK), not an input error.
//
// Thread-safety: none. The cachemanager server owns one index behind a mutex;
// every method, const ones included, must be called under it (const methods
// keep no mutable state, so concurrent const calls under a reader lock are
// safe too).
//
//   PrefixIndex index;
//   index.Store(WorkerSlot(0), HashFullBlocks(root, tokens, 16));
//   std::vector<Overlap> hits = index.FindOverlaps(prompt_hashes);  // [{worker 0, 12 blocks}, ...]
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "common/block_hash.h"
#include "common/kv_tier.h"
#include "services/cachemanager/index/worker_slot.h"

namespace kvfleet::cachemanager {

// How many leading blocks of a prompt one worker holds, in any tier; of
// those, how many only below its device (the rest are on it).
struct Overlap {
  WorkerSlot worker;
  int32_t matched_blocks = 0;
  int32_t host_blocks = 0;
  int32_t disk_blocks = 0;

  bool operator==(const Overlap&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Overlap& o) {
    os << "{worker " << o.worker << ", " << o.matched_blocks << " blocks";
    if (o.host_blocks > 0 || o.disk_blocks > 0) os << " (host " << o.host_blocks << ", disk " << o.disk_blocks << ")";
    return os << "}";
  }
};

class PrefixIndex {
 public:
  // Slots at or above this are a bug in the caller (the registry hands out
  // dense slots); per-worker state is a vector indexed by slot.
  static constexpr int32_t kMaxWorkerSlots = 1 << 16;

  PrefixIndex() = default;
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;
  PrefixIndex(PrefixIndex&&) = default;
  PrefixIndex& operator=(PrefixIndex&&) = default;

  // BlockStored: `w` now holds `hashes`, best in `tier`. Hashes it already
  // holds only take the new tier (a move between tiers); repeats within the
  // span change nothing. Returns the pairs added.
  int64_t Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier = KvTier::kDevice);
  // BlockRemoved: `w` no longer holds `hashes`; hashes it does not hold are
  // ignored. Returns the pairs removed.
  int64_t Remove(WorkerSlot w, std::span<const BlockHash> hashes);
  // Cleared, and a worker's removal: `w` holds nothing. O(blocks of w),
  // times a sorted-list erase per block, and releases w's set, so the slot
  // can be reused at once. Returns the pairs removed.
  int64_t Clear(WorkerSlot w);
  // Snapshot: `w` holds exactly `hashes` on its device (any order, repeats
  // allowed); its lower tiers' blocks follow as moves. Costs
  // O(old blocks + new hashes) and touches the shared map only for the
  // difference, so a snapshot that agrees with the index is cheap.
  void ReplaceAll(WorkerSlot w, std::span<const BlockHash> hashes);

  bool Holds(WorkerSlot w, const BlockHash& hash) const;
  // The tier `w` holds `hash` in (CHECK: it holds it).
  KvTier TierOf(WorkerSlot w, const BlockHash& hash) const;
  // Blocks `w` holds: what the worker itself counts as cached, if no event
  // was lost. 0 for a slot never used.
  int64_t BlockCount(WorkerSlot w) const;
  // Of BlockCount(w), the blocks held only in `tier` below the device (host
  // or disk). O(1).
  int64_t LowerBlockCount(WorkerSlot w, KvTier tier) const;
  // Hashes held by at least one worker.
  int64_t DistinctHashes() const { return static_cast<int64_t>(holders_.size()); }
  // (worker, hash) pairs: the sum of BlockCount over all workers.
  int64_t EntryCount() const { return entries_; }

  // For every worker holding hashes[0]: how many leading hashes it holds in
  // any tier (consecutive from hashes[0]; a worker holding h0, h1 and h3 but
  // not h2 has 2), and how many of those only in host memory or on disk
  // (one lookup per matched hash, for workers holding anything below their
  // device). Workers that hold none of the prefix are left out; the result is
  // in increasing slot order. One map lookup per hash walked and
  // O(workers still matching) work per hash (times log of its holders at
  // worst, see README.md); the walk stops at the first hash no
  // still-matching worker holds.
  std::vector<Overlap> FindOverlaps(std::span<const BlockHash> hashes) const;

  // OK, or the first broken invariant (see the top of this file).
  // O(entries × log holders); for tests and debug builds.
  absl::Status CheckInvariants() const;

 private:
  // A hash's holders in increasing slot order, so FindOverlaps intersects by
  // merging and sees at once when the next block has the same holders. Each
  // entry is slot · 4 + tier, so the walk counts lower-tier blocks without
  // another lookup and the order by entry is the order by slot. Most blocks
  // are held by a few workers; four 4-byte entries fit in the vector's own
  // 16 bytes of storage.
  using Holders = absl::InlinedVector<int32_t, 4>;
  static int32_t Entry(WorkerSlot w, KvTier tier) { return w.value() * 4 + static_cast<int32_t>(tier); }
  static WorkerSlot EntrySlot(int32_t entry) { return WorkerSlot(entry >> 2); }
  static KvTier EntryTier(int32_t entry) { return static_cast<KvTier>(entry & 3); }

  // What each worker holds, in which tier.
  using BlockTiers = absl::flat_hash_map<BlockHash, KvTier>;

  // The map of `w` (growing the per-worker table as needed).
  BlockTiers& MutableBlocksOf(WorkerSlot w);
  // Walks hashes[from..) in w's own map while w holds them, counting each
  // tier into `in_tier`; returns where it stopped. For the tail of a prompt
  // that only a worker or two still match: w's map is a small fraction of
  // the shared one, so its lookups mostly hit the caches.
  size_t WalkOwnBlocks(WorkerSlot w, std::span<const BlockHash> hashes, size_t from,
                       std::array<int32_t, kNumKvTiers>& in_tier) const;
  // Adds / drops `w` in holders(hash), O(|holders|); the caller keeps w's set
  // in step.
  void AddHolder(const BlockHash& hash, WorkerSlot w, KvTier tier);
  void DropHolder(const BlockHash& hash, WorkerSlot w);
  // Moves w's copy of `hash`, now in `held_in` (its own map's value), to
  // another `tier`: that value, its holder entry and the lower-tier counts.
  void MoveTier(WorkerSlot w, const BlockHash& hash, KvTier& held_in, KvTier tier);
  // Sets the tier of w's entry among the holders of `hash` (which it is).
  void SetHolderEntry(const BlockHash& hash, WorkerSlot w, KvTier tier);

  using HolderMap = absl::flat_hash_map<BlockHash, Holders>;
  // w's entry among the holders of `hash`, which w must be (CHECK).
  struct HolderEntry {
    HolderMap::iterator holders;
    Holders::iterator entry;
  };
  HolderEntry FindHolderEntry(const BlockHash& hash, WorkerSlot w);

  HolderMap holders_;
  std::vector<BlockTiers> blocks_;                              // by slot
  std::vector<std::array<int64_t, kNumKvTiers>> lower_counts_;  // by slot, then tier: blocks held there
  int64_t entries_ = 0;
};

}  // namespace kvfleet::cachemanager
