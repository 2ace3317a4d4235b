// What the KV cache manager asks of the tiers below the device cache (host
// memory, local disk: engine/kv/tiers) when a prefix lookup misses on the
// device. An interface so the block layer needs no executor or file.
//
// Thread-safety: the engine thread.
#pragma once

#include <optional>
#include <vector>

#include "common/block_hash.h"
#include "common/ids.h"

namespace kvfleet::engine {

class LowerKvTiers {
 public:
  virtual ~LowerKvTiers() = default;
  // The block cached under `hash` copied up from host memory into a device
  // block, committed under its hash, with one reference; nullopt when host
  // memory does not hold it or the device has no free block.
  virtual std::optional<BlockId> LoadFromHost(const BlockHash& hash) = 0;
  // Whether LoadFromHost would find it (a read-only probe).
  virtual bool InHost(const BlockHash& hash) const = 0;
  // Makes host memory's copy (if any) its most recently used: a page a
  // lookup is about to copy up outlives the evictions before it.
  virtual void TouchHost(const BlockHash& hash) = 0;
  // Whether the disk tier holds it (and host memory does not).
  virtual bool OnDiskOnly(const BlockHash& hash) const = 0;
  virtual bool has_disk() const = 0;
  // Starts reading `hashes` (blocks of request `id`'s prefix, each on disk
  // only: a run of consecutive blocks, or with page groups the disk-only
  // pages of a hit, window pages first) in the background into device blocks it allocates
  // now (the pool must have that many free); the request waits until the
  // engine finishes the load.
  virtual void StartDiskLoad(RequestId id, std::vector<BlockHash> hashes) = 0;
  virtual bool loads_in_flight() const = 0;
};

}  // namespace kvfleet::engine
