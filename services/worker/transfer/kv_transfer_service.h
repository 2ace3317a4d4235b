// The worker's KvTransfer service (proto/kvfleet/v1/kv_transfer.proto):
// serves this worker's KV blocks to a peer that lacks a prompt's prefix.
// Runs on its own port (transport::StartGrpcServer, with the worker's TLS or
// internal token). A pull is checked (its hashes, the puller's identity
// against this worker's), then the engine copies the blocks out at its next
// step (Engine::ExportKvBlocks) and this thread streams them: this
// worker's identity first, then each block's chunks.
//
// Limits: blocks per pull, chunk size, pulls at once (more are refused
// with RESOURCE_EXHAUSTED: the puller computes instead), and a deadline on
// the engine's copy.
//
// Thread-safety: gRPC's threads call PullBlocks concurrently.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <shared_mutex>
#include <string>

#include "engine/engine.h"
#include "engine/kv/transfer/kv_transfer_identity.h"
#include "kvfleet/v1/kv_transfer.grpc.pb.h"

namespace kvfleet::worker {

struct KvTransferServiceOptions {
  int64_t max_blocks_per_pull = 4096;
  uint64_t max_chunk_bytes = 1 << 20;
  int32_t max_concurrent_pulls = 4;
  std::chrono::milliseconds export_deadline{10000};
  // Fault injection for chaos tests: "corrupt-chunk" flips a byte of each
  // block's first chunk after its checksum was taken; "truncate-block"
  // ends the stream half way through the first block's first chunk;
  // "stall" holds every stream 3 s after the identity (a hung peer, or one
  // killed mid-pull); "forget-adapter" answers with an empty adapter
  // identity (a peer that does not know the field). Empty in production.
  std::string fault;
};

// A worker's identity for transfers, from its executor and KV format.
engine::KvTransferIdentity KvTransferIdentityOf(const engine::ExecutorInfo& info, const std::string& model_id,
                                                const std::string& kv_dtype);

class KvTransferService final : public v1::KvTransfer::Service {
 public:
  // Bound before the model loads, so the worker's port is known at once:
  // until Serve, a pull gets UNAVAILABLE.
  explicit KvTransferService(KvTransferServiceOptions options);
  KvTransferService(engine::Engine& engine, engine::KvTransferIdentity identity, KvTransferServiceOptions options);

  // Starts serving `engine`'s blocks under `identity`; Stop (before the
  // engine goes) waits for pulls in flight and refuses later ones.
  void Serve(engine::Engine& engine, engine::KvTransferIdentity identity);
  void Stop();

  grpc::Status PullBlocks(grpc::ServerContext* context, const v1::PullBlocksRequest* request,
                          grpc::ServerWriter<v1::PullBlocksResponse>* writer) override;
  // Engine::RenewKvLease; answers without waiting for the engine.
  grpc::Status RenewLease(grpc::ServerContext* context, const v1::RenewLeaseRequest* request,
                          v1::RenewLeaseResponse* response) override;

 private:
  const KvTransferServiceOptions options_;
  std::shared_mutex mu_;  // shared by each pull, exclusive to Serve and Stop
  engine::Engine* engine_ = nullptr;
  engine::KvTransferIdentity identity_;
  std::atomic<int32_t> in_flight_{0};
};

}  // namespace kvfleet::worker
