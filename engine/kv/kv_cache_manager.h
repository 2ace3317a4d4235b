// Gives requests the KV blocks they need, on top of the block pool: reuse
// of the longest cached prefix at admission, on-demand growth as tokens are
// scheduled, publication of blocks as they fill, and release on finish,
// cancel or preemption.
//
// A request's block i holds positions [i·block_size, (i+1)·block_size). Block
// hashes chain from RootBlockHash(model id, the request's cache salt), so
// tenants with different salts never share blocks.
//
// Page groups (model/arch/kv_page_groups.h): with G > 1 groups a logical
// block is G pages, one per group, and req.block_table interleaves them
// (block i of group g at i·G + g). Group 0 attends to every key and keeps
// its pages; a group with window w gives back its page of block i (kFreedPage
// in the table) once block i ends before p − w + 1 for the next position p
// to compute. Window pages are cached under a hash derived from the block's
// (unpublished: the cluster sees group 0 only; the lower tiers keep them
// marked so), and a prefix hit of n blocks needs the window pages of the
// blocks its window reaches, so the hit is the longest run for which they
// are all on the device or in host memory, or, loaded first, on disk.
//
// Thread-safety: none; the engine thread owns it.
//
//   KvCacheManager kv(pool, /*block_size=*/16, "SmolLM2");
//   kv.AcquireCachedPrefix(req);                  // at admission
//   kv.RecordAdmission(req);                      // once it is admitted
//   if (!kv.Allocate(req, n)) { /* preempt someone */ }
//   ... executor computes n tokens ...
//   req.num_computed_tokens += n; kv.CommitFullBlocks(req);
//   kv.Free(req);                                 // finished, cancelled or preempted
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/kv/lower_kv_tiers.h"
#include "engine/request/request.h"

namespace kvfleet::engine {

struct PrefixCacheCounters {
  int64_t queried_tokens = 0;  // prompt tokens looked up at admission
  int64_t hit_tokens = 0;      // of those, served from cache
};

class KvCacheManager {
 public:
  // The table entry of a window page already given back.
  static constexpr BlockId kFreedPage = BlockId(-1);

  // group_windows: each page group's window (0: full attention; group 0
  // must be 0); {0} is one group, a page per block.
  // model_id and model_fingerprint root the block hashes (common/block_hash.h).
  KvCacheManager(BlockPool& pool, int32_t block_size, std::string model_id, bool enable_prefix_caching = true,
                 std::vector<int64_t> group_windows = {0}, std::string model_fingerprint = "");

  // Tiers below the device that a prefix lookup continues into; may be
  // null; must outlive this.
  void set_lower_tiers(LowerKvTiers* tiers) { tiers_ = tiers; }
  // Starts the pull of a request's prefix from the peer its kv_peer names;
  // true when the request must wait for it (kv_loading). Asked at the
  // first lookup of a request with a peer, before the cache is searched.
  void set_peer_pull(std::function<bool(Request&)> start) { start_peer_pull_ = std::move(start); }

  int32_t block_size() const { return block_size_; }
  int32_t num_groups() const { return static_cast<int32_t>(group_windows_.size()); }
  // The most pages a request of `tokens` tokens holds at once when its
  // prefill chunks have at most chunk_tokens: every block in group 0; in
  // a window group the window's blocks and a chunk's.
  int32_t MostPagesHeld(int64_t tokens, int32_t chunk_tokens) const;
  // Logical blocks a request's table covers (its size over the group count).
  int32_t HeldBlocks(const Request& req) const { return static_cast<int32_t>(req.block_table.size()) / num_groups(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  // Where position `position` of the request lives in page group `group`:
  // page * block_size + slot (the executor's slot numbering).
  int64_t SlotOf(const Request& req, int64_t position, int32_t group) const {
    const size_t entry = static_cast<size_t>(position / block_size_) * static_cast<size_t>(num_groups()) + group;
    return static_cast<int64_t>(req.block_table[entry].value()) * block_size_ + position % block_size_;
  }
  int32_t BlocksFor(int64_t tokens) const { return static_cast<int32_t>((tokens + block_size_ - 1) / block_size_); }

  // For a request that holds no blocks: takes the longest run of its leading
  // full blocks that the cache holds (never all of its tokens: the last one
  // is always computed, for its logits) and marks those tokens computed.
  // With lower tiers, the run continues through blocks copied up from host
  // memory; where it reaches blocks only the disk holds, a background load
  // starts (once per admission) and req.kv_loading says to wait for it.
  // Returns the number of tokens served from cache.
  int32_t AcquireCachedPrefix(Request& req);

  // For a request that holds no blocks: the free blocks admitting it would
  // take (AcquireCachedPrefix, then Allocate of up to `budget` tokens)
  // without taking them or copying anything up a tier: a cached block
  // another request holds costs none, one on the free list or in host
  // memory one. nullopt when its prefix continues on disk (admitting it
  // starts a load instead).
  std::optional<int32_t> BlocksToAdmit(const Request& req, int32_t budget) const;

  // Counts the prefix-cache query and hit of a request's first admission
  // (not of re-admissions after preemption), once it is admitted.
  void RecordAdmission(Request& req);

  // Makes the block table cover num_computed_tokens + num_new_tokens. All or
  // nothing: false (and no change) when the pool has too few free blocks.
  bool Allocate(Request& req, int32_t num_new_tokens);
  // Blocks Allocate(req, num_new_tokens) would take from the pool.
  int32_t MissingBlocks(const Request& req, int32_t num_new_tokens) const;

  // Publishes every block that became full since the last call, then gives
  // back the window pages the next position no longer reaches.
  void CommitFullBlocks(Request& req);

  // Returns the blocks past those that `req.tokens` needs (the pending
  // token included): after a verification rejected drafted tokens, their
  // emptied blocks. Such blocks were never published (CHECK).
  void ReleaseBlocksPastTokens(Request& req);

  // Returns every block (the last ones first, so a sequence's tail is
  // evicted before its head) and resets the request's KV state.
  void Free(Request& req);

  // The hash a window group's page of a block is cached under.
  static BlockHash PageHash(const BlockHash& block_hash, int32_t group);
  // Every page a prefix hit of hashes.size() blocks (their group-0 hashes)
  // reads: those hashes, then each window group's pages of the blocks its
  // window reaches from the hit's end. What a pull from a peer must bring.
  std::vector<BlockHash> PagesOfHit(std::span<const BlockHash> hashes) const;

  const PrefixCacheCounters& counters() const { return counters_; }

 private:
  BlockHash RootFor(const Request& req) const;
  // Asks the lower tiers to load blocks `first`.. of req's prefix: the run
  // the disk alone holds, from `first_hash` on.
  void StartDiskLoad(Request& req, int32_t first, const BlockHash& first_hash);
  // Block b's hash, `parent` the one before it (the root for block 0):
  // from req.prompt_block_hashes when it covers b (they must chain from
  // RootFor(req)), computed otherwise.
  BlockHash HashOfBlock(const Request& req, int32_t b, const BlockHash& parent) const;
  // The first block a window group still reads when the next position to
  // compute is `next_position`.
  int32_t FirstBlockInWindow(int32_t group, int64_t next_position) const;
  // Whether a lookup finds `hash` on the device or in host memory, or, with
  // through_disk, on disk too.
  bool Findable(const BlockHash& hash, bool through_disk) const;
  // With page groups: of a run of n leading blocks whose group-0 hashes are
  // `hashes`, the longest prefix whose window pages are all findable.
  int32_t LongestWindowedHit(std::span<const BlockHash> hashes, bool through_disk = false) const;
  // With page groups and a disk tier: the longer hit the disk holds past
  // `hit_now` blocks (blocks 0 when none), every page it needs (the window
  // groups', then group 0's) and of those the ones only the disk holds.
  struct WindowedDiskHit {
    int32_t blocks = 0;
    std::vector<BlockHash> pages;
    std::vector<BlockHash> from_disk;
  };
  // Of group-0 hashes found through the disk (ProbePrefix).
  WindowedDiskHit LongerHitOnDisk(std::span<const BlockHash> hashes, int32_t hit_now) const;
  // With page groups: the hashes of the hit device and host memory give
  // (group 0 cut to where the window pages are), and in `longer` the one
  // the disk would give, when a load may be tried; one walk of the prefix.
  std::vector<BlockHash> ProbeWindowedHit(const Request& req, WindowedDiskHit* longer) const;
  // Starts one background load of those disk-only pages (or marks req to
  // wait for the load in flight); false when there is none or no room.
  bool StartWindowedDiskLoad(Request& req, WindowedDiskHit hit);
  // AcquireCachedPrefix with page groups.
  int32_t AcquireWindowedPrefix(Request& req);
  // Takes the window pages a hit of hashes.size() blocks needs into the
  // table's empty entries, from the device or host memory; false as soon as
  // one is in neither.
  bool AcquireWindowPages(Request& req, std::span<const BlockHash> hashes);
  void ReleasePassedWindowPages(Request& req);
  // The group-0 walk of BlocksToAdmit / AcquireCachedPrefix without taking:
  // hashes of the leading blocks findable (Findable); `above_disk` gets
  // how many lead before the first only the disk holds.
  std::vector<BlockHash> ProbePrefix(const Request& req, bool through_disk, size_t* above_disk) const;

  BlockPool& pool_;
  int32_t block_size_;
  std::vector<int64_t> group_windows_;
  std::string model_id_;
  std::string model_fingerprint_;
  bool enable_prefix_caching_;
  PrefixCacheCounters counters_;
  LowerKvTiers* tiers_ = nullptr;
  std::function<bool(Request&)> start_peer_pull_;
};

}  // namespace kvfleet::engine
