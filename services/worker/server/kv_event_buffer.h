// The worker's KV events on their way to the cachemanager, without the
// transport: what the publisher (kv_event_publisher.h) sends and when, as a
// plain part with unit tests; the publisher is the gRPC glue around it.
//
// Rules:
//   - A session starts awaiting a snapshot: events are dropped until the
//     engine's snapshot arrives (it supersedes them), which goes first. A
//     snapshot asked for (the cachemanager saw a gap) drops the pending
//     events again until the next one; a snapshot nobody asked for is
//     ignored.
//   - Consecutive blocks of one chain stored in one tier travel as one
//     event (each block's parent is the previous one's hash); consecutive
//     removals too. A clear supersedes everything pending.
//   - Batches are numbered 1, 2, ... within a session. One is due when
//     events are pending, when the load changed (a request was admitted)
//     while streaming, or after a quiet spell: half the heartbeat while
//     streaming, the whole heartbeat while awaiting the snapshot (only
//     liveness is owed then).
//   - Fault injection (tests): the Nth batch carrying events is dropped,
//     its sequence number used, as a network fault would.
//
// Thread-safety: the listener methods on the engine thread, the rest on
// the publisher's threads; one mutex inside.
//
//   KvEventBuffer buffer;
//   buffer.Connect(Clock::now());
//   if (buffer.RequestSnapshot()) engine.RequestKvSnapshot();
//   while (buffer.Wait(flush_interval)) {
//     if (std::optional<OutgoingBatch> b = buffer.NextBatch(now, heartbeat)) send(*b);
//   }
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/block_hash.h"
#include "common/kv_tier.h"
#include "engine/kv/kv_event_listener.h"

namespace kvfleet::worker {

struct PublishedEvent {
  enum class Kind { kStored, kRemoved, kCleared, kSnapshot };
  Kind kind = Kind::kStored;
  std::vector<BlockHash> hashes;    // kStored (chain order), kRemoved, kSnapshot
  std::optional<BlockHash> parent;  // kStored: of its first block
  // kSnapshot: each hash's parent (none for a sequence's first block).
  std::vector<std::optional<BlockHash>> parents;
  KvTier tier = KvTier::kDevice;    // kStored
  bool operator==(const PublishedEvent&) const = default;
};

struct OutgoingBatch {
  uint64_t sequence = 0;
  std::vector<PublishedEvent> events;
  bool dropped = false;  // fault injection: not to be sent
};

class KvEventBuffer final : public engine::KvEventListener {
 public:
  using Clock = std::chrono::steady_clock;

  // fault_drop_event_batch: the Nth batch carrying events is dropped (0: none).
  explicit KvEventBuffer(int64_t fault_drop_event_batch = 0) : fault_drop_event_batch_(fault_drop_event_batch) {}

  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override;
  void OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) override;
  void OnBlockRemoved(const BlockHash& hash) override;
  void OnAllCleared() override;
  void OnSnapshot(std::span<const engine::CachedBlock> blocks) override;

  // A new session: sequence numbers start again; `now` starts the quiet spell.
  void Connect(Clock::time_point now);
  // Awaits a snapshot, dropping what is pending. True when the engine must
  // be asked for one (false when one is awaited already).
  bool RequestSnapshot();
  // The session ended: nothing pending, nothing accepted until the next.
  void Disconnect();
  void NotifyLoadChanged();
  void Stop();

  // Waits up to `timeout`, or until a load change while streaming. False
  // once stopped.
  bool Wait(std::chrono::milliseconds timeout);
  // Sleeps `d` unless stopped; false once stopped.
  bool Sleep(std::chrono::milliseconds d);
  // The batch due at `now`, if any (rules above), taking the pending events.
  std::optional<OutgoingBatch> NextBatch(Clock::time_point now, std::chrono::milliseconds heartbeat);

 private:
  enum class State { kDisconnected, kAwaitingSnapshot, kStreaming };
  void Store(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier);

  const int64_t fault_drop_event_batch_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kDisconnected;
  std::vector<PublishedEvent> pending_ ABSL_GUARDED_BY(mu_);
  bool load_changed_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batches_with_events_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point last_batch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::worker
