// The tiers below the device KV cache, host memory and local disk, joined to
// the block pool: what the device evicts goes down instead of vanishing, and
// a prefix lookup that misses on the device continues below it.
//
//   device ──evict──▶ host ──evict──▶ disk ──evict──▶ gone
//      ▲                │                │
//      └──copy up now───┘                │
//      └──────read in the background─────┘
//
// - Eviction: the pool's hook copies a cached block's bytes into the host
//   tier (or, without one, queues them for the disk) before the device slot
//   is reused. The host tier's least recently used block is queued for the
//   disk in turn. A block already held below is not copied again.
// - Lookup: a host hit is copied straight into a free device block (a
//   memcpy, or one DMA on a GPU, far cheaper than recomputing it); a run of
//   disk-only blocks is read by the disk tier's I/O thread while the engine
//   keeps stepping, then copied into device blocks at the start of a step
//   (Poll) and committed, so the waiting request hits them on the device.
// - Identity: a copy is the device's bytes (KvBlockCopier), so a reloaded block is
//   bit-identical to the computed one; the disk's files carry the model id,
//   numerics identity (kernels and KV dtype) and geometry, and a checksum.
// - Events: it sits between the pool's listeners and the KV event
//   publisher, announcing each block's best tier (OnBlockMoved when the
//   device loses a block a lower tier keeps; OnBlockRemoved only when no
//   tier holds it).
//
// Thread-safety: the engine thread, except stats() (any thread).
//
//   ASSIGN_OR_RETURN(auto tiers, CreateKvTiers(options, executor, model_id, &publisher));
//   PendingPrefill pending(block_size, tiers.get());
//   BlockPool pool(n, &pending);
//   tiers->Attach(pool);                 // the eviction hook
//   kv.set_lower_tiers(tiers.get());
//   for (RequestId id : tiers->Poll()) ...  // each step, before scheduling
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_event_listener.h"
#include "engine/kv/lower_kv_tiers.h"
#include "engine/kv/tiers/disk_kv_tier.h"
#include "engine/kv/tiers/host_kv_tier.h"
#include "engine/kv/tiers/kv_block_copier.h"

namespace kvfleet::engine {

struct KvTierOptions {
  int64_t host_bytes = 0;  // 0: no host-memory tier
  std::string disk_dir;    // empty: no disk tier
  int64_t disk_bytes = 0;

  bool enabled() const { return host_bytes > 0 || !disk_dir.empty(); }
  absl::Status Validate() const;
};

// Counters since start, for one lower tier.
struct KvTierCounters {
  int64_t blocks = 0;           // held now
  int64_t capacity_blocks = 0;  // 0: the tier is off
  int64_t block_bytes = 0;      // bytes one block takes there (a file's header included)
  int64_t hit_blocks = 0;       // copied up to the device on a lookup
  int64_t loads = 0;            // copy-ups (host: per block; disk: per background read)
  double load_seconds = 0.0;    // their time
  // disk: one adopted block's read time at start (DiskKvTier), the load
  // cost per block until loads have been measured; 0 when none.
  double startup_seconds_per_block = 0.0;
  int64_t bytes_down = 0;       // written into the tier
  int64_t bytes_up = 0;         // read back to the device
  int64_t evictions = 0;        // dropped from the tier to make room
  int64_t errors = 0;           // disk: damaged or foreign reads, failed writes
  bool writable = true;         // disk: false once a write failed
};

struct KvTierStats {
  KvTierCounters host;
  KvTierCounters disk;
};

class KvTierManager final : public KvEventListener, public BlockEvictionHook, public LowerKvTiers {
 public:
  // `copier` moves blocks of `format` (block_bytes > 0); `allocate_host`
  // gives the host tier its memory; `next` (may be null) receives the
  // events. `model_id` and the format name everything that decides a
  // block's bytes. INVALID_ARGUMENT for a tier that cannot be made (a host
  // tier under two blocks, an unusable directory).
  static absl::StatusOr<std::unique_ptr<KvTierManager>> Create(const KvTierOptions& options,
                                                               std::unique_ptr<KvBlockCopier> copier,
                                                               const KvBlockFormat& format,
                                                               const HostMemoryAllocator& allocate_host,
                                                               std::string_view model_id, KvEventListener* next);

  // The pool whose evictions come down here (its listener chain must lead
  // to this too); it must outlive this.
  void Attach(BlockPool& pool);

  // Start of a step: finishes the background reads (their blocks copied
  // into free device blocks and committed) and writes. The requests whose
  // loads ended.
  std::vector<RequestId> Poll();
  bool loads_in_flight() const override { return !jobs_.empty(); }
  // Every block below the device and not on it, as OnBlockMoved calls to
  // `next` (after a snapshot of the device's hashes), each block's parent
  // before it wherever the parent is among them: the tiers hold a chain's
  // tail longer than its head (it was evicted first), so in their own
  // order children would come first and the index could not place them.
  void AnnounceLowerBlocks();
  KvTierStats stats() const;
  // Waits until the disk tier has written and read everything queued
  // (tests: a tiny model steps faster than files are written, and a full
  // write queue drops blocks, as it should on a slow disk).
  void FlushDisk();

  // KvEventListener: the device's own events, from the pool's chain.
  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override;
  void OnBlockRemoved(const BlockHash& hash) override;
  void OnAllCleared() override;
  void OnSnapshot(std::span<const CachedBlock> blocks) override;
  // BlockEvictionHook.
  void BeforeEvict(BlockId block, const BlockHash& hash, bool published) override;
  // LowerKvTiers.
  std::optional<BlockId> LoadFromHost(const BlockHash& hash) override;
  bool InHost(const BlockHash& hash) const override;
  void TouchHost(const BlockHash& hash) override;
  bool OnDiskOnly(const BlockHash& hash) const override;
  bool has_disk() const override { return disk_ != nullptr; }
  void StartDiskLoad(RequestId id, std::vector<BlockHash> hashes) override;
  // A host-memory block's bytes into `out` (block_bytes long) for a peer,
  // without moving it up; false when host memory does not hold it.
  bool CopyFromHost(const BlockHash& hash, std::span<uint8_t> out, std::optional<BlockHash>* parent, bool* published);
  // Reads blocks only the disk holds for a peer, in the background, without
  // copying them up: at a later Poll, `done` gets the leading ones read
  // whole (entries and bytes in order). Until then loads_in_flight() holds.
  using PeerRead = std::function<void(std::vector<DiskKvTier::Entry>, std::vector<std::vector<uint8_t>>)>;
  void ReadForPeer(std::vector<BlockHash> hashes, PeerRead done);
  // The device blocks the loads in flight fill (one reference each), for
  // the engine's audit.
  std::vector<BlockId> BlocksInFlight() const;

 private:
  struct Job {
    RequestId request;
    std::vector<DiskKvTier::Entry> entries;  // what it reads, in order (a window page is unpublished)
    std::vector<BlockId> blocks;             // allocated at the start, one per entry (none for a peer)
    PeerRead for_peer;                       // set: a peer's read, handed over instead of copied up
  };

  KvTierManager(std::unique_ptr<KvBlockCopier> copier, KvEventListener* next);
  // A block leaving the host tier (its bytes readable in `bytes` until
  // return): to disk if there is one, else gone.
  void SpillFromHost(const HostKvTier::Entry& entry, std::span<const uint8_t> bytes);
  void WriteToDisk(const BlockHash& hash, const std::optional<BlockHash>& parent, std::span<const uint8_t> bytes,
                   bool published);
  // A block dropped from a tier: announce its new best tier (or its removal).
  void AnnounceBest(const BlockHash& hash, const std::optional<BlockHash>& parent);
  // Copies what a read brought into the job's blocks and commits them, then
  // returns every block to the pool: the filled ones cached at the free
  // list's tail, where the waiting request hits them at this step's
  // admission.
  void FinishRead(DiskKvTier::ReadResult& r, Job& job);
  // After a read that stopped early: a file gone is a miss; one that read
  // back wrong is deleted, counted and announced gone.
  void DropFailedRead(const DiskKvTier::ReadResult& r, const Job& job);
  void UpdateStats();

  const std::unique_ptr<KvBlockCopier> copier_;
  KvEventListener* const next_;
  BlockPool* pool_ = nullptr;
  std::unique_ptr<HostKvTier> host_;
  std::unique_ptr<DiskKvTier> disk_;
  // The device's hashed blocks and their parents (events need parents).
  absl::flat_hash_map<BlockHash, std::optional<BlockHash>> on_device_;
  std::vector<uint8_t> staging_;  // one block, for device → disk without a host tier
  absl::flat_hash_map<uint64_t, Job> jobs_;
  uint64_t next_job_ = 1;
  KvTierStats counters_;  // engine thread

  mutable std::mutex mu_;
  KvTierStats published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::engine
