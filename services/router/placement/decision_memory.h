// The router's short-lived record of its own placement decisions, which
// covers the lag between sending a request and hearing about it from the
// worker (README.md, "Decision memory"):
//
// - prefix memory: for a TTL chosen per decision (Placement makes it as long
//   as the prefill is predicted to take) after a request with block hashes
//   h0..hn-1 went to worker w, w is taken to hold h0..hn-1. A worker stores
//   a block's hash only once it has computed the block, and the cachemanager
//   hears of it a flush later, so without this a burst of requests with a
//   new shared prefix would scatter over the cluster. A decision whose
//   attempt was refused or failed is retracted at once.
// - in-flight load: a decision counts one request and its new KV blocks
//   against w until w's own load report includes it (Acknowledge: the
//   report carries the newest ticket w admitted from this router), or until
//   the router settles it (the request ended: nothing is in flight any
//   more, and counting it on would only push the next request of the same
//   prefix away from the worker that holds it). `in_flight_ttl` is only a
//   safety bound for a report that never comes.
//
// Hashes are chained, so h_i names the whole prefix h0..h_i: if (h_i, w) is
// remembered, w was sent all of h0..h_i, and (h_j, w) for j < i expires no
// earlier. "Leading blocks remembered" is therefore monotone in i, and one
// binary search per worker finds it: O(log n) lookups, however many workers
// share a hot prefix. (The size cap drops a decision's first hashes first,
// which can only make the answer smaller.)
//
// What it owns: a (hash, worker slot) → expiry map, a min-heap by expiry of
// every (hash, slot, expiry) recorded (TTLs differ per decision), a FIFO of
// in-flight decisions in ticket order (one constant safety TTL, so also in
// expiry order) and, per slot, its in-flight tickets in order. Expiry pops
// the heap top and the FIFO front; the size caps drop the soonest to
// expire. A refresh by a later decision only moves the pair's expiry in
// the map; its heap entry moves when it reaches the top. A retracted pair's
// entry no longer finds it and is dropped. Worker names are interned to dense slots, freed when nothing
// names them and reused.
//
// Invariants: each pair has a heap entry whose expiry is at most the
// pair's (the entry that removes it); a slot is
// free only when no heap entry or in-flight entry names it (each holds a
// reference; Forget purges both of the slot it frees); remembered_blocks()
// is the number of pairs; a slot's in-flight sums are those of its
// unsettled entries in the in-flight FIFO, whose tickets increase from
// front to back; a slot's ticket queue holds, in order, a superset of its
// unsettled entries' tickets, and no ticket the FIFO has dropped.
//
// Thread-safety: none; Placement calls it under its mutex.
//
//   DecisionMemory memory({.prefix_ttl = 5s, .max_blocks = 1 << 18, .in_flight_ttl = 60s, .max_in_flight = 1 << 16});
//   memory.Expire(now);
//   memory.Acknowledge("w1", report_admitted_ticket);
//   std::vector<int32_t> depth = memory.RememberedBlocks(hashes, workers, now);
//   uint64_t ticket = memory.Record("w1", hashes, /*new_blocks=*/12, now, /*prefix_ttl=*/40s);
//   memory.Settle(ticket);  // the request ended
//   memory.Retract("w1", hashes, ticket);  // or: its attempt was refused
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/block_hash.h"

namespace kvfleet::router {

class DecisionMemory {
 public:
  using Clock = std::chrono::steady_clock;

  struct Limits {
    Clock::duration prefix_ttl{};     // the default per decision; 0: no prefix memory
    int64_t max_blocks = 1;           // (hash, worker) pairs kept at most
    Clock::duration in_flight_ttl{};  // 0: no in-flight accounting
    int64_t max_in_flight = 1;        // in-flight decisions kept at most
  };

  struct InFlight {
    int32_t requests = 0;
    int64_t blocks = 0;
  };

  explicit DecisionMemory(Limits limits) : limits_(limits) {}

  // Drops everything that expired at or before `now`.
  void Expire(Clock::time_point now);

  // `worker` was sent a request whose full blocks hash to `hashes` and that
  // adds `new_blocks` KV blocks there; its prefix is remembered for
  // `prefix_ttl` (default: limits' prefix_ttl; nothing when prefix memory is
  // off or the TTL is not positive). Returns the decision's ticket, unique
  // and increasing (sent to the worker, and for Settle); it counts in flight
  // only when in-flight accounting is on.
  uint64_t Record(const std::string& worker, std::span<const BlockHash> hashes, int32_t new_blocks,
                  Clock::time_point now, std::optional<Clock::duration> prefix_ttl = std::nullopt);

  // `worker`'s latest load report includes every request of ours up to
  // `ticket` (the newest it admitted): they stop counting in flight. 0 or an
  // unknown worker: nothing. O(tickets settled).
  void Acknowledge(const std::string& worker, uint64_t ticket);

  // The attempt behind `ticket` was refused or failed before computing
  // anything: forget the pairs only it recorded, and settle it. Pairs another
  // decision also recorded stay (that request may be computing them), with
  // the expiry they have now.
  void Retract(const std::string& worker, std::span<const BlockHash> hashes, uint64_t ticket);

  // The request behind `ticket` ended: it no longer counts as in flight. A
  // ticket already expired, settled, forgotten or 0 is ignored. O(log
  // in-flight entries).
  void Settle(uint64_t ticket);

  // For each of `workers`, how many leading blocks of `hashes` the router
  // remembers sending it (0 for workers it has no record of).
  // O(workers × log hashes) map lookups.
  std::vector<int32_t> RememberedBlocks(std::span<const BlockHash> hashes, std::span<const std::string> workers,
                                        Clock::time_point now) const;

  // What the router sent `worker` within the in-flight window.
  InFlight InFlightLoad(const std::string& worker) const;

  // Drops everything about `worker` (it left the cluster). O(remembered hashes
  // + FIFO entries): rare, when a worker leaves.
  void Forget(const std::string& worker);

  int64_t remembered_blocks() const { return static_cast<int64_t>(pairs_.size()); }
  int64_t in_flight() const { return in_flight_count_; }

 private:
  struct PairKey {
    BlockHash hash;
    uint32_t slot;

    bool operator==(const PairKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const PairKey& k) {
      return H::combine(std::move(h), k.hash, k.slot);
    }
  };
  struct PrefixEntry {
    BlockHash hash;
    uint32_t slot;
    Clock::time_point expires;
    uint64_t seq;  // insertion order: equal expiries go first in, first out
  };
  struct InFlightEntry {
    uint32_t slot;
    Clock::time_point expires;
    int32_t blocks;
    uint64_t ticket;
    bool settled = false;  // its sums are already taken off the slot
  };
  struct WorkerState {
    std::string name;
    int64_t refs = 0;  // heap + in-flight entries naming it; the slot is freed at 0
    InFlight in_flight;
    std::deque<uint64_t> tickets;  // its in-flight tickets, oldest first (some may be settled)
  };
  static bool ExpiresLater(const PrefixEntry& a, const PrefixEntry& b) {
    return a.expires != b.expires ? a.expires > b.expires : a.seq > b.seq;
  }

  uint32_t Intern(const std::string& worker);
  void Release(uint32_t slot);
  void Unref(uint32_t slot);
  void PopPrefix();
  void PopInFlight();
  // Marks the entry behind `ticket` settled; false if there is none to settle.
  bool SettleEntry(uint64_t ticket);

  Limits limits_;
  struct Held {
    Clock::time_point expires;
    // The first and the latest decision that recorded the pair: Retract
    // removes it only when the two are the retracted decision.
    uint64_t first_ticket;
    uint64_t last_ticket;
  };
  absl::flat_hash_map<PairKey, Held> pairs_;
  std::vector<PrefixEntry> prefix_heap_;  // min-heap by expiry (ExpiresLater)
  std::deque<InFlightEntry> in_flight_fifo_;
  absl::flat_hash_map<std::string, uint32_t> slot_of_;
  std::vector<WorkerState> slots_;  // indexed by slot; free ones have an empty name
  std::vector<uint32_t> free_slots_;
  int64_t in_flight_count_ = 0;
  uint64_t next_ticket_ = 1;
  uint64_t next_seq_ = 0;
};

}  // namespace kvfleet::router
