// The cluster's KV map: which worker holds which KV blocks, by content hash
// (common/block_hash.h), fed by the workers' KV events and asked by routers
// how much of a prompt's prefix each worker already holds. See README.md in
// this folder for the data structure, its memory and its complexity.
//
// What it owns: for every (worker slot, block hash) pair a worker reported as
// stored and has not removed since, two entries — the hash → holders map that
// answers FindOverlaps, and the worker's own map (tier, and the block's
// place in its chain) that makes Clear and ReplaceAll O(that worker's
// blocks), BlockCount exact and lets FindOverlaps skip along chains.
//
// Invariants (CheckInvariants() verifies them all):
//   - w is in holders(h) iff h is in w's map; holders(h) is in strictly
//     increasing slot order (no duplicates);
//   - no hash has an empty holder list (entries are erased when their last
//     holder goes, so memory follows what is cached, not what was ever seen);
//   - EntryCount() == sum of BlockCount(w) == sum of |holders(h)|;
//   - w's entry in holders(h) carries the tier w's own map gives h;
//   - w's chain records (children counts, orphans, drops, unplaced count)
//     agree with the parents, depths and tiers of the blocks it holds.
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

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "common/block_hash.h"
#include "common/kv_tier.h"
#include "services/cachemanager/index/worker_slot.h"

namespace kvfleet::cachemanager {

// Where a Store's first hash hangs in its chain (the rest follow in chain
// order): the first block of a chain, the child of a known block, or
// unknown (an older worker's snapshot, or a caller that does not say). With the
// parents known, FindOverlaps can skip along a prompt instead of looking up
// every hash (README.md, "Skipping along a chain").
struct ChainParent {
  enum class Kind : uint8_t { kUnknown, kRoot, kBlock };
  Kind kind = Kind::kUnknown;
  BlockHash hash;  // kBlock only

  static ChainParent Root() { return {.kind = Kind::kRoot}; }
  static ChainParent Of(const BlockHash& parent) { return {.kind = Kind::kBlock, .hash = parent}; }
};

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

  // BlockStored: `w` now holds `hashes`, best in `tier`; hashes[0] hangs
  // from `parent` and each next hash from the one before it (with no
  // parent named, no hash's parent is known). Hashes it
  // already holds only take the new tier (a move between tiers; their
  // parent stays what it was); repeats within the span change nothing.
  // Returns the pairs added.
  int64_t Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier = KvTier::kDevice,
                ChainParent parent = {});
  // BlockRemoved: `w` no longer holds `hashes`; hashes it does not hold are
  // ignored. Returns the pairs removed.
  int64_t Remove(WorkerSlot w, std::span<const BlockHash> hashes);
  // Cleared, and a worker's removal: `w` holds nothing. O(blocks of w),
  // times a sorted-list erase per block, and releases w's map, so the slot
  // can be reused at once. Returns the pairs removed.
  int64_t Clear(WorkerSlot w);
  // Snapshot: `w` holds exactly `hashes` on its device (any order, repeats
  // allowed: the first counts); its lower tiers' blocks follow as moves.
  // `parents` names what each hash hangs from (as long as `hashes`), and
  // the depths follow from them within the snapshot; empty when the worker
  // did not say: then blocks it held keep their parents and new ones have
  // none known. Costs O(old blocks + new hashes) and touches the shared map
  // only for the difference, so a snapshot that agrees with the index is
  // cheap.
  void ReplaceAll(WorkerSlot w, std::span<const BlockHash> hashes, std::span<const ChainParent> parents = {});

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
  // Whether every block `w` holds has a known depth and its parent held:
  // then FindOverlaps may bisect along w's chains instead of walking them
  // (README.md, "Skipping along a chain"). True for a slot never used.
  bool ChainsWhole(WorkerSlot w) const;
  // Workers whose chains are not whole. O(1).
  int32_t WorkersWithBrokenChains() const { return unplaced_workers_; }

  // For every worker holding hashes[0]: how many leading hashes it holds in
  // any tier (consecutive from hashes[0]; a worker holding h0, h1 and h3 but
  // not h2 has 2), and how many of those only in host memory or on disk.
  // Workers that hold none of the prefix are left out; the result is in
  // increasing slot order. `hashes` must be a chain (each the parent of the
  // next, as HashFullBlocks makes them). It walks hash by hash while many
  // workers match; once four or fewer do and their chains are whole and
  // known, it bisects the rest for the points where the holders change
  // (O(changes × log n) lookups). README.md has both.
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

  // A worker's held blocks that named a block as their parent, by tier;
  // `placed` counts those whose depth is known.
  struct ChainKids {
    std::array<int32_t, kNumKvTiers> by_tier{};
    int32_t placed = 0;
    bool empty() const { return by_tier == std::array<int32_t, kNumKvTiers>{}; }
    bool operator==(const ChainKids&) const = default;
  };
  struct HeldBlock {
    BlockHash parent;    // when parent_kind is kBlock
    int32_t depth = -1;  // position in its chain (0: a first block); -1: unknown
    ChainKids kids;      // held children
    KvTier tier = KvTier::kDevice;
    ChainParent::Kind parent_kind = ChainParent::Kind::kUnknown;
    bool in_drops = false;  // listed in the worker's `drops`
  };
  using HeldBlocks = absl::flat_hash_map<BlockHash, HeldBlock>;
  // Everything the index knows about one worker's blocks.
  struct WorkerBlocks {
    HeldBlocks held;
    // Kids of blocks the worker does not hold (it dropped or never had them).
    absl::flat_hash_map<BlockHash, ChainKids> orphans;
    // (depth, hash) of held blocks with a known depth and a child in a faster
    // tier: where a chain's tier can step back up, so where bisection must
    // look closer.
    absl::btree_set<std::pair<int32_t, BlockHash>> drops;
    std::array<int64_t, kNumKvTiers> lower_counts{};  // held blocks by tier below the device
    // Held blocks whose depth is unknown or whose parent is not held. While
    // any is, FindOverlaps walks this worker's prompts hash by hash.
    int64_t unplaced = 0;
  };

  WorkerBlocks& MutableWorker(WorkerSlot w);
  // Whether `b`, held by the worker, breaks its chains (README.md).
  static bool Unplaced(const WorkerBlocks& wb, const HeldBlock& b) {
    return b.depth < 0 || (b.parent_kind == ChainParent::Kind::kBlock && !wb.held.contains(b.parent));
  }
  void AdjustUnplaced(WorkerBlocks& wb, int64_t delta);
  // Sets the depth of every held block from the parents held (a snapshot's
  // own): 0 for a chain's first block, one more than a held parent's known
  // depth, else unknown (a parent not held, or false parents in a cycle).
  static void PlaceChains(HeldBlocks& held);
  // The kids record of `parent`: its own if held, else its orphan entry.
  static ChainKids& KidsOf(WorkerBlocks& wb, const BlockHash& parent);
  // Lists or unlists a held block in `drops` as its tier and kids say.
  static void RefreshDrop(WorkerBlocks& wb, const BlockHash& hash, HeldBlock& b);
  // Fills in a block just put into w's map (`it`), stored with `parent`.
  void AddBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it, KvTier tier, ChainParent parent);
  void RemoveBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it);
  void MoveBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it, KvTier tier);

  // A worker still matching a prompt during FindOverlaps, with how many of
  // the blocks so far it holds in each tier.
  struct Matching {
    WorkerSlot worker;
    std::array<int32_t, kNumKvTiers> in_tier{};
  };
  using MatchingList = absl::InlinedVector<Matching, 64>;
  // Counts hashes[last_counted + 1..) for workers with whole chains that
  // hold hashes[0..last_counted] (prefix_index_overlaps.cc).
  void BisectRest(std::span<const BlockHash> hashes, size_t last_counted, MatchingList& matching) const;
  // Walks hashes[from..) in w's own map while w holds them, counting each
  // tier into `in_tier`; returns where it stopped. For the tail of a prompt
  // that only a worker or two still match: w's map is a small fraction of
  // the shared one, so its lookups mostly hit the caches.
  size_t WalkOwnBlocks(WorkerSlot w, std::span<const BlockHash> hashes, size_t from,
                       std::array<int32_t, kNumKvTiers>& in_tier) const;
  // Adds / drops `w` in holders(hash), O(|holders|); the caller keeps w's map
  // in step.
  void AddHolder(const BlockHash& hash, WorkerSlot w, KvTier tier);
  void DropHolder(const BlockHash& hash, WorkerSlot w);
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
  std::vector<WorkerBlocks> workers_;  // by slot
  int64_t entries_ = 0;
  int32_t unplaced_workers_ = 0;  // workers with `unplaced` > 0
};

}  // namespace kvfleet::cachemanager
