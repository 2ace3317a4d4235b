// Blocks a prefill worker keeps for a decode worker that has not pulled them
// yet (disaggregated prefill and decode, docs/architecture.md). A lease holds
// one reference on each of a finished prefill's blocks, so eviction cannot
// take them; it ends when the pull that names it is served (Release) or at
// its deadline (Expire), and either way the blocks become ordinary cache,
// evictable, so nothing is stranded when the reader dies.
//
// The leased blocks are bounded (max_blocks): a lease that would pass the
// bound first ends the oldest leases, so a flood of prefills whose readers
// never come cannot pin the whole cache.
//
// Thread-safety: none; the engine thread owns it, as the pool.
//
//   KvLeases leases(pool, /*max_blocks=*/pool.num_blocks() / 2);
//   leases.Hold("req-7", kv.PagesOfHit(req.prompt_block_hashes), now + 30s);
//   ... a peer's pull names "req-7" and is served ...
//   leases.Renew("req-7", now + 30s);  // its reader is queued, not gone
//   leases.Release("req-7");
//   leases.Expire(now);  // every step: leases past their deadline end
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/block_hash.h"
#include "engine/kv/block_pool.h"

namespace kvfleet::engine {

struct KvLeaseCounters {
  int64_t held = 0;       // leases taken
  int64_t released = 0;   // ended by the pull that named them
  int64_t expired = 0;    // ended at their deadline, unpulled
  int64_t displaced = 0;  // ended early to keep the leased blocks under the bound
  int64_t renewed = 0;    // deadlines moved by the reader's renewals
};

class KvLeases {
 public:
  using Clock = std::chrono::steady_clock;

  KvLeases(BlockPool& pool, int32_t max_blocks);
  // Every lease ends; the blocks go back to the pool.
  ~KvLeases();
  KvLeases(const KvLeases&) = delete;
  KvLeases& operator=(const KvLeases&) = delete;

  // Takes a reference on the cached blocks of `hashes`, in order, stopping at
  // the first the pool no longer caches, under `id` until `deadline`. A
  // lease of the same id ends first. Returns the blocks held (0: no lease).
  int32_t Hold(const std::string& id, std::span<const BlockHash> hashes, Clock::time_point deadline);
  // Ends the lease `id` (a pull naming it was served); false if none.
  bool Release(const std::string& id);
  // Moves the lease `id`'s deadline to `deadline` (its reader still waits
  // to pull); false if none.
  bool Renew(const std::string& id, Clock::time_point deadline);
  // Ends every lease whose deadline is at or before `now`; how many.
  int32_t Expire(Clock::time_point now);

  // The earliest deadline, for the engine's idle wait; nullopt with none.
  std::optional<Clock::time_point> NextDeadline() const;
  bool Holds(const std::string& id) const { return leases_.contains(id); }
  int32_t size() const { return static_cast<int32_t>(leases_.size()); }
  int32_t leased_blocks() const { return leased_blocks_; }
  const KvLeaseCounters& counters() const { return counters_; }
  // Adds one to refs[b] for every block a lease holds (Engine::AuditBlocks).
  void CountReferences(std::vector<int32_t>& refs) const;

 private:
  struct Lease {
    std::vector<BlockId> blocks;
    Clock::time_point deadline;
    uint64_t order = 0;  // taken order: the bound ends the oldest first
  };
  void End(absl::flat_hash_map<std::string, Lease>::iterator it);

  BlockPool& pool_;
  const int32_t max_blocks_;
  absl::flat_hash_map<std::string, Lease> leases_;
  int32_t leased_blocks_ = 0;
  uint64_t next_order_ = 0;
  KvLeaseCounters counters_;
};

}  // namespace kvfleet::engine
