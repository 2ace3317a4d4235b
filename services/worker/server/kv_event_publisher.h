// Streams the engine's KV events and load to the cachemanager
// (PublishEvents), so the router can place requests where their prefix is
// already cached. The worker keeps serving whether or not the cachemanager
// is there.
//
// Protocol (proto/kvfleet/v1/cachemanager.proto): Register, open the event
// stream, ask the engine for a snapshot and send it first (sequence 1), then
// batches of events every `flush_interval` with consecutive sequence
// numbers, and a load report at least every half heartbeat interval while
// streaming (kv_event_buffer.h says when). When the
// cachemanager asks for a snapshot (it saw a gap), events are dropped until
// the engine's next snapshot, which supersedes them. When the stream breaks,
// events are dropped (the next connection starts with a snapshot) and the
// publisher reconnects with exponential backoff.
//
// What to send and when (the snapshot state, coalescing, sequence numbers,
// the flush and heartbeat rules, fault injection) is KvEventBuffer
// (kv_event_buffer.h), transport-free and unit-tested; this class is the
// gRPC session around it: Register, the stream, the reader of commands,
// reconnection with backoff, and the wire form.
//
// Thread-safety: the KvEventListener methods run on the engine thread and
// only append to the buffer; everything else runs on the publisher's own
// threads.
//
//   KvEventPublisher publisher(options);
//   Engine engine(executor, engine_options, &publisher);
//   publisher.Start(engine, draining, &admitted);   ...   publisher.Stop();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/engine.h"
#include "engine/kv/kv_event_listener.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "services/worker/server/admitted_tickets.h"
#include "services/worker/server/kv_event_buffer.h"

namespace kvfleet::worker {

struct KvEventPublisherOptions {
  std::string cachemanager_address;  // host:port
  std::string worker_id;
  std::string endpoint;  // where routers reach this worker
  std::string model_id;
  int32_t block_size = 16;
  int32_t capacity_blocks = 0;
  std::string numerics;                     // the executor's numerics identity
  std::string role = "both";                // --role: which phases routers send it
  transport::ClientChannelOptions channel;  // TLS towards the cachemanager
  std::chrono::milliseconds flush_interval{50};
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{3000};
  // Fault injection for the chaos tests (--fault-drop-event-batch): the Nth
  // batch carrying events is lost on the way (its sequence number used, the
  // batch not sent), as a network fault would. 0: none.
  int64_t fault_drop_event_batch = 0;
};

class KvEventPublisher : public engine::KvEventListener {
 public:
  explicit KvEventPublisher(KvEventPublisherOptions options);
  ~KvEventPublisher() override;

  // Engine thread: into the buffer.
  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override {
    buffer_.OnBlockStored(hash, parent);
  }
  void OnBlockRemoved(const BlockHash& hash) override { buffer_.OnBlockRemoved(hash); }
  void OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) override {
    buffer_.OnBlockMoved(hash, parent, tier);
  }
  void OnAllCleared() override { buffer_.OnAllCleared(); }
  void OnSnapshot(std::span<const engine::CachedBlock> blocks) override { buffer_.OnSnapshot(blocks); }

  // `engine` and `admitted` must outlive Stop(). `draining` reports the
  // worker's drain; `admitted` is what the load reports carry as tickets.
  void Start(engine::Engine& engine, std::function<bool()> draining, const AdmittedTickets* admitted);
  // Any thread: the load changed (a request was admitted); the next report
  // goes out now rather than at the next flush or heartbeat, so a router
  // never sees this worker idle just after sending it a burst.
  void NotifyLoadChanged();
  void Stop();
  // Before Start: what the KV tiers below the device hold (registered with
  // the capacity, so the index makes room for their blocks).
  void SetLowerTierCapacity(int64_t host_blocks, int64_t disk_blocks) {
    host_capacity_blocks_ = host_blocks;
    disk_capacity_blocks_ = disk_blocks;
  }
  bool connected() const { return connected_.load(); }

 private:
  void Store(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier);
  void Run();
  // One connection: Register, stream until it breaks or Stop(). Returns
  // whether the stream lasted at least a liveness deadline (which resets
  // the backoff).
  bool Session();
  // Awaits a snapshot, asking the engine for one unless one is awaited already.
  void AwaitSnapshot();
  // The batch with this worker's ids and its current load report.
  v1::EventBatch ToWire(const OutgoingBatch& batch) const;

  const KvEventPublisherOptions options_;
  engine::Engine* engine_ = nullptr;
  std::function<bool()> draining_;
  const AdmittedTickets* admitted_ = nullptr;
  const uint64_t incarnation_;
  int64_t host_capacity_blocks_ = 0;
  int64_t disk_capacity_blocks_ = 0;
  std::atomic<bool> connected_{false};

  KvEventBuffer buffer_;
  std::mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* session_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the call in flight, for Stop()
  std::thread thread_;
};

}  // namespace kvfleet::worker
