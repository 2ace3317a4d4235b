// Gives requests the KV blocks they need, on top of the block pool: reuse
// of the longest cached prefix at admission, on-demand growth as tokens are
// scheduled, publication of blocks as they fill, and release on finish,
// cancel or preemption.
//
// A request's block i holds positions [i·block_size, (i+1)·block_size). Block
// hashes chain from RootBlockHash(model id, the request's cache salt), so
// tenants with different salts never share blocks.
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
#include <optional>
#include <string>

#include "engine/kv/block_pool.h"
#include "engine/kv/lower_kv_tiers.h"
#include "engine/request.h"

namespace kvfleet::engine {

struct PrefixCacheCounters {
  int64_t queried_tokens = 0;  // prompt tokens looked up at admission
  int64_t hit_tokens = 0;      // of those, served from cache
};

class KvCacheManager {
 public:
  KvCacheManager(BlockPool& pool, int32_t block_size, std::string model_id, bool enable_prefix_caching = true);

  // Tiers below the device that a prefix lookup continues into; may be
  // null; must outlive this.
  void set_lower_tiers(LowerKvTiers* tiers) { tiers_ = tiers; }

  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return pool_.num_free(); }
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

  // Publishes every block that became full since the last call.
  void CommitFullBlocks(Request& req);

  // Returns the blocks past those that `req.tokens` needs (the pending
  // token included): after a verification rejected drafted tokens, their
  // emptied blocks. Such blocks were never published (CHECK).
  void ReleaseBlocksPastTokens(Request& req);

  // Returns every block (the last ones first, so a sequence's tail is
  // evicted before its head) and resets the request's KV state.
  void Free(Request& req);

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

  BlockPool& pool_;
  int32_t block_size_;
  std::string model_id_;
  bool enable_prefix_caching_;
  PrefixCacheCounters counters_;
  LowerKvTiers* tiers_ = nullptr;
};

}  // namespace kvfleet::engine
