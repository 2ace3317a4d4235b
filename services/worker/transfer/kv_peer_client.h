// The engine's KvPeerFetcher over gRPC: pulls blocks from a peer's
// KvTransfer port, checks the peer's identity against this worker's, and
// reassembles and checks every block (KvBlockAssembler) before the engine
// sees it. A pull runs on one of a few threads of its own, under a
// deadline; any failure (peer gone, refused, damaged, late) delivers the
// whole blocks that came and the reason, and the engine computes the rest.
//
// Thread-safety: Fetch from any thread. The destructor waits for the pulls
// in flight (each bounded by the deadline) and fails those still queued.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/kv/transfer/kv_peer_fetcher.h"
#include "engine/kv/transfer/kv_transfer_identity.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::worker {

struct KvPeerClientOptions {
  engine::KvTransferIdentity identity;  // this worker's
  transport::ClientChannelOptions channel;
  std::chrono::milliseconds deadline{10000};  // a whole pull
  uint64_t max_chunk_bytes = 1 << 20;
  int32_t max_concurrent_pulls = 4;  // threads; more pulls wait their turn
  int32_t max_queued_pulls = 64;     // beyond: refused at once (the engine computes)
  // Bytes of blocks the pulls running and queued ask for, at most in all
  // and from one peer: a pull past either brings the leading blocks that
  // fit (none fit: refused, RESOURCE_EXHAUSTED).
  int64_t max_bytes_in_flight = int64_t{512} << 20;
  int64_t max_peer_bytes_in_flight = int64_t{256} << 20;
};

class KvPeerClient final : public engine::KvPeerFetcher {
 public:
  explicit KvPeerClient(KvPeerClientOptions options);
  ~KvPeerClient() override;

  void Fetch(const std::string& endpoint, const std::string& adapter, std::vector<BlockHash> hashes,
             const std::string& lease_id, Done done) override;
  // An asynchronous call under its own short deadline, beside the pulls.
  void RenewLease(const std::string& endpoint, const std::string& lease_id) override;

 private:
  struct Pull {
    std::string endpoint;
    std::vector<BlockHash> hashes;
    Done done;
    int64_t bytes = 0;  // reserved against the limits until it ends
    std::string lease_id;
    std::string adapter;  // the blocks' LoRA identity; empty: the base
  };
  // Of `wanted` blocks from `endpoint`, how many the byte limits let in
  // now; reserves their bytes. Under mu_.
  size_t ReserveLocked(const std::string& endpoint, size_t wanted);
  void Release(const Pull& pull);
  void Work();
  void Run(Pull& pull);
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& endpoint);

  const KvPeerClientOptions options_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Pull> queue_;
  bool stop_ = false;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  int64_t bytes_in_flight_ = 0;
  absl::flat_hash_map<std::string, int64_t> peer_bytes_in_flight_;
  std::vector<std::thread> threads_;
};

}  // namespace kvfleet::worker
