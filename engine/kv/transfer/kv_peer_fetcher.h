// How the engine asks for a peer's blocks: the transport (the worker's
// KvTransfer client) implements it, a test can implement it with another
// engine's ExportKvBlocks. The engine never waits on it: it marks the
// request as loading, keeps stepping everyone else, and takes the blocks
// from its inbox when `done` delivers them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/block_hash.h"
#include "engine/kv/transfer/kv_block_stream.h"

namespace kvfleet::engine {

class KvPeerFetcher {
 public:
  virtual ~KvPeerFetcher() = default;
  // `blocks`: the whole blocks that arrived, in the asked order (fewer when
  // the pull stopped early); `status`: why it stopped early (OK when the
  // peer held no more), each failure's reason for the metrics.
  using Done = std::function<void(std::vector<KvBlockBytes> blocks, absl::Status status)>;
  // Pulls `hashes` from the peer at `endpoint` (naming the lease it holds
  // them under, when not empty), blocks computed under `adapter` (the
  // request's LoRA identity, "name@digest"; empty: the base model), which
  // the handshake names; returns at once and calls `done` exactly once, on
  // any thread, within the fetcher's deadline.
  virtual void Fetch(const std::string& endpoint, const std::string& adapter, std::vector<BlockHash> hashes,
                     const std::string& lease_id, Done done) = 0;
  // Asks the peer at `endpoint` to keep lease `lease_id` for another of its
  // lease durations (a split request queued here will pull it later).
  // Returns at once; a renewal that fails is not retried: the next one, or
  // the blocks as ordinary cache, or computing them, covers it.
  virtual void RenewLease(const std::string& endpoint, const std::string& lease_id) = 0;
};

}  // namespace kvfleet::engine
