// The cluster's KV map: the live workers (registry and load table) and the
// prefix index of the blocks each holds, kept consistent with each other.
// The cachemanager's gRPC layer translates to and from these plain structs
// and holds one KvMap under one mutex.
//
// Rules (how the map recovers from restarts and lost events; docs/design.md,
// "KV cache and block hashing"):
// - Register with a new incarnation of a known worker id replaces the old
//   one and everything it had indexed: a restarted worker starts empty. A
//   new incarnation at another endpoint while the old one is still live is
//   a second worker claiming the id, not a restart: it is refused and the
//   first keeps it (otherwise the two would replace each other every few
//   seconds). Once the first falls silent past the liveness deadline, the
//   id is free again, so a worker restarted at a new address gets in.
// - Event batches carry consecutive sequence numbers per incarnation,
//   restarting at 1 with every Register. A batch that skips ahead is applied
//   and the worker is asked for a snapshot (events were lost); one that does
//   not move forward is refused whole, before anything is applied.
// - Until a worker's snapshot arrives (after Register or a gap), Apply asks
//   for one; a snapshot replaces what the index had for the worker.
// - Sweep removes workers silent for longer than the liveness deadline.
//
// Thread-safety: none; callers serialize.
//
//   KvMap map({.liveness_deadline = 3s});
//   RETURN_IF_ERROR(map.Register(worker, now).status());  // ALREADY_EXISTS: a twin
//   ASSIGN_OR_RETURN(ApplyResult r, map.Apply(batch, now));
//   std::vector<WorkerOverlapInfo> o = map.FindOverlaps("SmolLM2", hashes);
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/block_hash.h"
#include "common/worker_load.h"
#include "services/cachemanager/index/prefix_index.h"
#include "services/cachemanager/index/worker_slot.h"

namespace kvfleet::cachemanager {

using Clock = std::chrono::steady_clock;

struct WorkerDescriptor {
  std::string worker_id;  // stable across the worker's restarts
  uint64_t incarnation = 0;
  std::string endpoint;
  std::string model_id;
  int32_t block_size = 0;
  int32_t capacity_blocks = 0;
  std::string numerics;  // backend and kernel version: tokens are identical only within one
  std::string role;      // "prefill", "decode" or "both" (empty from a worker before roles)
  // Blocks its tiers below the device can hold (0: no such tier).
  int64_t host_capacity_blocks = 0;
  int64_t disk_capacity_blocks = 0;
};

using ::kvfleet::AdmittedTicket;
using ::kvfleet::WorkerLoad;

struct KvEventRecord {
  enum class Kind { kStored, kRemoved, kCleared, kSnapshot };
  Kind kind = Kind::kStored;
  std::vector<BlockHash> hashes;  // kStored (chain order), kRemoved, kSnapshot
  // kStored: the tier the blocks are now best held in; storing a held block
  // in another tier is a move. Snapshots list the device's blocks.
  KvTier tier = KvTier::kDevice;
  // kStored: what hashes[0] hangs from (a worker's events always say).
  ChainParent parent;
  // kSnapshot: what each hash hangs from; empty when the worker did not say.
  std::vector<ChainParent> parents;
};

struct KvEventBatch {
  std::string worker_id;
  uint64_t incarnation = 0;
  uint64_t sequence = 0;
  std::vector<KvEventRecord> events;
  std::optional<WorkerLoad> load;
};

struct WorkerView {
  WorkerDescriptor descriptor;
  WorkerLoad load;
  int64_t indexed_blocks = 0;       // in any tier
  int64_t indexed_host_blocks = 0;  // of those, held only in host memory
  int64_t indexed_disk_blocks = 0;  // of those, held only on disk
  Clock::time_point last_seen;
};

struct MembershipChange {
  enum class Kind { kJoined, kDraining, kLeft };
  Kind kind = Kind::kJoined;
  WorkerView worker;
};

struct WorkerOverlapInfo {
  WorkerView worker;
  int32_t matched_blocks = 0;  // leading blocks held in any tier
  int32_t host_blocks = 0;     // of those, only in host memory
  int32_t disk_blocks = 0;     // of those, only on disk
};

struct ApplyResult {
  bool send_snapshot = false;  // ask the worker for a snapshot (only once per need)
  std::string reason;
  std::vector<MembershipChange> changes;  // e.g. the worker started draining
};

struct KvMapOptions {
  Clock::duration liveness_deadline = std::chrono::seconds(3);
  // The most blocks indexed for a worker that registered no capacity
  // (capacity_blocks 0). A worker that did is held to its capacity, its
  // lower tiers' included.
  int64_t blocks_without_capacity = int64_t{1} << 20;
};

struct KvMapCounters {
  int64_t events_ingested = 0;
  int64_t snapshots = 0;
  int64_t sequence_gaps = 0;
  int64_t rejected_batches = 0;
  // Hashes not indexed because their worker already held as many blocks as
  // it registered: a worker out of step with what it said it has.
  int64_t over_capacity_hashes = 0;
};

class KvMap {
 public:
  explicit KvMap(KvMapOptions options) : options_(options) {}

  // JOINED for the worker, preceded by LEFT for an incarnation it replaces.
  // ALREADY_EXISTS, naming both endpoints, when a live worker at another
  // endpoint holds the id; nothing changes then.
  absl::StatusOr<std::vector<MembershipChange>> Register(const WorkerDescriptor& worker, Clock::time_point now);
  // NOT_FOUND for a worker id or incarnation that is not registered (the
  // worker should Register again); FAILED_PRECONDITION for a sequence that
  // does not move forward. Either way nothing is applied.
  absl::StatusOr<ApplyResult> Apply(const KvEventBatch& batch, Clock::time_point now);
  // Every live worker of the model with the leading blocks of `hashes` it holds.
  std::vector<WorkerOverlapInfo> FindOverlaps(const std::string& model_id, std::span<const BlockHash> hashes) const;
  // Removes the workers silent past the liveness deadline; LEFT for each.
  std::vector<MembershipChange> Sweep(Clock::time_point now);
  // Live workers of `model_id` (all models when empty), by worker id.
  std::vector<WorkerView> List(const std::string& model_id) const;

  const KvMapCounters& counters() const { return counters_; }
  const PrefixIndex& index() const { return index_; }
  // Index and registry agree: every slot in use belongs to one live worker.
  absl::Status CheckInvariants() const;

 private:
  struct Entry {
    WorkerDescriptor descriptor;
    WorkerSlot slot;
    WorkerLoad load;
    Clock::time_point last_seen;
    uint64_t last_sequence = 0;
    bool needs_snapshot = true;
    bool snapshot_requested = false;
  };

  WorkerView View(const Entry& e) const;
  MembershipChange Remove(const std::string& worker_id);
  WorkerSlot AllocateSlot();
  // False when the worker reported more blocks than it can hold.
  bool ApplyEvent(Entry& e, const KvEventRecord& event);
  int64_t BlockLimit(const Entry& e) const;

  KvMapOptions options_;
  PrefixIndex index_;
  absl::flat_hash_map<std::string, Entry> workers_;
  std::vector<WorkerSlot> free_slots_;
  int32_t next_slot_ = 0;
  KvMapCounters counters_;
};

}  // namespace kvfleet::cachemanager
