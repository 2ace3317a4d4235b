#include "services/worker/server/kv_event_buffer.h"

#include <utility>

namespace kvfleet::worker {

void KvEventBuffer::OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  Store(hash, parent, KvTier::kDevice);
}

void KvEventBuffer::OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) {
  Store(hash, parent, tier);
}

void KvEventBuffer::Store(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;  // the next snapshot covers it
  if (!pending_.empty()) {
    PublishedEvent& last = pending_.back();
    if (last.kind == PublishedEvent::Kind::kStored && last.tier == tier && parent && last.hashes.back() == *parent) {
      last.hashes.push_back(hash);
      return;
    }
  }
  pending_.push_back({.kind = PublishedEvent::Kind::kStored, .hashes = {hash}, .parent = parent, .tier = tier});
}

void KvEventBuffer::OnBlockRemoved(const BlockHash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;
  if (pending_.empty() || pending_.back().kind != PublishedEvent::Kind::kRemoved) {
    pending_.push_back({.kind = PublishedEvent::Kind::kRemoved});
  }
  pending_.back().hashes.push_back(hash);
}

void KvEventBuffer::OnAllCleared() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;
  pending_.clear();  // superseded
  pending_.push_back({.kind = PublishedEvent::Kind::kCleared});
}

void KvEventBuffer::OnSnapshot(std::span<const engine::CachedBlock> blocks) {
  PublishedEvent snapshot{.kind = PublishedEvent::Kind::kSnapshot};
  snapshot.hashes.reserve(blocks.size());
  snapshot.parents.reserve(blocks.size());
  for (const engine::CachedBlock& b : blocks) {
    snapshot.hashes.push_back(b.hash);
    snapshot.parents.push_back(b.parent);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kAwaitingSnapshot) return;  // nobody asked (any more)
    pending_.clear();
    pending_.push_back(std::move(snapshot));
    state_ = State::kStreaming;
  }
  wake_.notify_all();
}

void KvEventBuffer::Connect(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kDisconnected;
  pending_.clear();
  sequence_ = 0;
  batches_with_events_ = 0;
  last_batch_ = now;
}

bool KvEventBuffer::RequestSnapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kAwaitingSnapshot) return false;
  state_ = State::kAwaitingSnapshot;
  pending_.clear();
  return true;
}

void KvEventBuffer::Disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kDisconnected;
  pending_.clear();
}

void KvEventBuffer::NotifyLoadChanged() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    load_changed_ = true;
  }
  wake_.notify_all();
}

void KvEventBuffer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
}

bool KvEventBuffer::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_for(lock, timeout, [this] { return stop_ || (load_changed_ && state_ == State::kStreaming); });
  return !stop_;
}

bool KvEventBuffer::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !wake_.wait_for(lock, d, [this] { return stop_; });
}

std::optional<OutgoingBatch> KvEventBuffer::NextBatch(Clock::time_point now, std::chrono::milliseconds heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool awaiting = state_ == State::kAwaitingSnapshot;
  const bool load_changed = load_changed_ && !awaiting;
  // The first batch should carry the snapshot; while the engine produces
  // it, send only what liveness needs.
  const auto quiet_limit = awaiting ? heartbeat : heartbeat / 2;
  if (pending_.empty() && !load_changed && now - last_batch_ < quiet_limit) return std::nullopt;
  OutgoingBatch batch{.sequence = ++sequence_, .events = std::exchange(pending_, {})};
  load_changed_ = false;
  last_batch_ = now;
  batch.dropped = !batch.events.empty() && ++batches_with_events_ == fault_drop_event_batch_;
  return batch;
}

}  // namespace kvfleet::worker
