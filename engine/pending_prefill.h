// The prompt tokens a worker still has to prefill, as its load report's
// pending_prefill_tokens: over the requests it holds, the distinct full
// prompt blocks that are not computed yet (not cached in the block pool),
// plus each still-prefilling request's tokens past them (its partial last
// block and any resumed output). A preempted request's recomputation is
// not counted again. A prefix shared
// by a queue of requests is computed once, so it counts once (counted per
// request, a worker holding a hot prefix looked several prompts busier than
// it is, and the router sent the next request for that prefix elsewhere).
//
// Kept up to date incrementally, O(1) per block event and O(prompt blocks)
// per request joining or leaving, so reading it costs nothing however long
// the queue: it sits between the block pool and the pool's listener (the KV
// event publisher), and forwards every event.
//
// Thread-safety: none; the engine thread (or a simulation) owns it.
//
//   PendingPrefill pending(block_size, &publisher);
//   BlockPool pool(num_blocks, &pending);
//   pending.Attach(pool);
//   pending.Add(req);       // it joined (needs req.prompt_block_hashes)
//   pending.Computed(req);  // its prefill is done (its first token)
//   pending.Remove(req);    // it finished
//   stats.pending_prefill_tokens = pending.tokens();
#pragma once

#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_event_listener.h"
#include "engine/request/request.h"

namespace kvfleet::engine {

class PendingPrefill final : public KvEventListener {
 public:
  // `next` (may be null) receives every event; it must outlive this.
  // Without prefix caching nothing is shared or published: each request
  // counts all its tokens until its prefill is done.
  PendingPrefill(int32_t block_size, KvEventListener* next, bool prefix_caching = true)
      : block_size_(block_size), next_(next), prefix_caching_(prefix_caching) {}

  // The pool whose cache says what is computed; it must outlive this.
  void Attach(const BlockPool& pool) { pool_ = &pool; }

  void Add(Request& r);
  void Computed(Request& r);
  void Remove(Request& r);
  // Blocks a peer pull is bringing (after Add of a request that has them):
  // not pending while they travel. Arrived when the pull ends: those it
  // did not bring are pending again.
  void Arriving(std::span<const BlockHash> hashes);
  void Arrived(std::span<const BlockHash> hashes);
  int64_t tokens() const { return uncomputed_blocks_ * block_size_ + tail_tokens_; }

  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override;
  void OnBlockRemoved(const BlockHash& hash) override;
  void OnAllCleared() override;
  void OnSnapshot(std::span<const CachedBlock> blocks) override;

 private:
  struct Block {
    int32_t requests = 0;   // active requests whose prompt has it
    bool computed = false;  // cached in the pool
    int32_t arriving = 0;   // peer pulls bringing it
    bool pending() const { return !computed && arriving == 0; }
  };
  // The tokens a request counts on its own: past its prompt's full blocks
  // (the partial last block and any resumed output), or all of them
  // without prefix caching.
  int64_t TailOf(const Request& r) const {
    if (!prefix_caching_) return r.num_tokens();
    return r.num_tokens() - static_cast<int64_t>(r.prompt_block_hashes.size()) * block_size_;
  }

  const int32_t block_size_;
  KvEventListener* const next_;
  const bool prefix_caching_;
  const BlockPool* pool_ = nullptr;
  absl::flat_hash_map<BlockHash, Block> blocks_;
  int64_t uncomputed_blocks_ = 0;
  int64_t tail_tokens_ = 0;
};

}  // namespace kvfleet::engine
