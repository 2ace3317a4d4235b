#include "services/worker/server/kv_event_publisher.h"

#include <random>

#include "common/logging.h"
#include "services/transport/grpc_channel.h"
#include "services/transport/load_report_convert.h"
#include "services/worker/server/proto_convert.h"

namespace kvfleet::worker {

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)), incarnation_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) {}

KvEventPublisher::~KvEventPublisher() { Stop(); }

namespace {

v1::KvTier ToProto(KvTier tier) {
  switch (tier) {
    case KvTier::kHost:
      return v1::KV_TIER_HOST;
    case KvTier::kDisk:
      return v1::KV_TIER_DISK;
    case KvTier::kDevice:
      break;
  }
  return v1::KV_TIER_DEVICE;
}

}  // namespace

void KvEventPublisher::OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  Store(hash, parent, KvTier::kDevice);
}

void KvEventPublisher::OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) {
  Store(hash, parent, tier);
}

void KvEventPublisher::Store(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;  // the next snapshot covers it
  // Consecutive blocks of one chain, in one tier, travel as one event.
  const v1::KvTier wire_tier = ToProto(tier);
  if (!pending_.empty() && pending_.back().has_stored() && pending_.back().stored().tier() == wire_tier && parent &&
      pending_.back().stored().hashes(pending_.back().stored().hashes_size() - 1) == parent->ToBytes()) {
    pending_.back().mutable_stored()->add_hashes(hash.ToBytes());
    return;
  }
  v1::KvEvent& e = pending_.emplace_back();
  e.mutable_stored()->add_hashes(hash.ToBytes());
  e.mutable_stored()->set_tier(wire_tier);
  if (parent) e.mutable_stored()->set_parent(parent->ToBytes());
}

void KvEventPublisher::OnBlockRemoved(const BlockHash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;
  if (pending_.empty() || !pending_.back().has_removed()) pending_.emplace_back().mutable_removed();
  pending_.back().mutable_removed()->add_hashes(hash.ToBytes());
}

void KvEventPublisher::OnAllCleared() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming) return;
  pending_.clear();  // superseded
  pending_.emplace_back().mutable_cleared();
}

void KvEventPublisher::OnSnapshot(std::span<const BlockHash> hashes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kAwaitingSnapshot) return;  // nobody asked (any more)
  pending_.clear();
  v1::Snapshot* snapshot = pending_.emplace_back().mutable_snapshot();
  for (const BlockHash& h : hashes) snapshot->add_hashes(h.ToBytes());
  state_ = State::kStreaming;
  wake_.notify_all();
}

void KvEventPublisher::AwaitSnapshot() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kAwaitingSnapshot) return;
    state_ = State::kAwaitingSnapshot;
    pending_.clear();
  }
  engine_->RequestKvSnapshot();
}

void KvEventPublisher::Start(engine::Engine& engine, std::function<bool()> draining,
                             const AdmittedTickets* admitted) {
  engine_ = &engine;
  draining_ = std::move(draining);
  admitted_ = admitted;
  thread_ = std::thread([this] { Run(); });
}

void KvEventPublisher::NotifyLoadChanged() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    load_changed_ = true;
  }
  wake_.notify_all();
}

void KvEventPublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (session_context_ != nullptr) session_context_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool KvEventPublisher::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !wake_.wait_for(lock, d, [this] { return stop_; });
}

void KvEventPublisher::Run() {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    // Only a session that lasted resets the backoff: one refused at once
    // (say, two workers claiming one id) must not hammer the cachemanager.
    if (Session()) backoff = options_.initial_backoff;
    if (!SleepFor(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

v1::EventBatch KvEventPublisher::TakeBatch() {
  v1::EventBatch batch;
  batch.set_worker_id(options_.worker_id);
  batch.set_incarnation(incarnation_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (v1::KvEvent& e : pending_) *batch.add_events() = std::move(e);
    pending_.clear();
    load_changed_ = false;
  }
  // The tickets before the stats (LoadOf says why).
  const std::vector<v1::PlacementTicket> admitted =
      admitted_ != nullptr ? admitted_->Snapshot() : std::vector<v1::PlacementTicket>{};
  *batch.mutable_load() = transport::ToProto(LoadOf(engine_->Stats(), draining_ && draining_(), admitted));
  return batch;
}

bool KvEventPublisher::Session() {
  auto stub = v1::CacheManager::NewStub(transport::CreateClientChannel(options_.cachemanager_address, options_.channel));
  v1::RegisterRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_incarnation(incarnation_);
  request.set_endpoint(options_.endpoint);
  request.set_model_id(options_.model_id);
  request.set_block_size(options_.block_size);
  request.set_capacity_blocks(options_.capacity_blocks);
  request.set_host_capacity_blocks(host_capacity_blocks_);
  request.set_disk_capacity_blocks(disk_capacity_blocks_);
  request.set_numerics(options_.numerics);
  v1::RegisterResponse registered;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      session_context_ = &context;  // Stop() cancels it
    }
    const grpc::Status status = stub->Register(&context, request, &registered);
    {
      std::lock_guard<std::mutex> lock(mu_);
      session_context_ = nullptr;
    }
    if (!status.ok()) {
      KVFLEET_LOG_DEBUG("cachemanager {} unreachable: {}", options_.cachemanager_address, status.error_message());
      return false;
    }
  }
  const auto heartbeat = std::chrono::milliseconds(std::max(registered.heartbeat_interval_ms(), 1));

  grpc::ClientContext context;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    session_context_ = &context;
  }
  auto stream = stub->PublishEvents(&context);
  AwaitSnapshot();
  connected_ = true;
  KVFLEET_LOG_INFO("publishing KV events to the cachemanager at {} as {}", options_.cachemanager_address,
                   options_.worker_id);
  std::thread reader([&] {
    v1::PublisherCommand command;
    while (stream->Read(&command)) {
      if (!command.send_snapshot()) continue;
      KVFLEET_LOG_INFO("cachemanager asks for a snapshot: {}", command.reason());
      AwaitSnapshot();
    }
  });

  uint64_t sequence = 0;
  int64_t batches_with_events = 0;
  const auto started = std::chrono::steady_clock::now();
  auto last_sent = started;
  while (true) {
    bool has_events = false, awaiting_snapshot = false, load_changed = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, options_.flush_interval,
                     [this] { return stop_ || (load_changed_ && state_ == State::kStreaming); });
      if (stop_) break;
      has_events = !pending_.empty();
      awaiting_snapshot = state_ == State::kAwaitingSnapshot;
      load_changed = load_changed_ && !awaiting_snapshot;
    }
    const auto now = std::chrono::steady_clock::now();
    // The first batch should carry the snapshot; while waiting for the
    // engine to produce it, send only what liveness needs.
    const auto quiet_limit = awaiting_snapshot ? heartbeat : heartbeat / 2;
    if (!has_events && !load_changed && now - last_sent < quiet_limit) continue;
    v1::EventBatch batch = TakeBatch();
    batch.set_sequence(++sequence);
    if (batch.events_size() > 0 && ++batches_with_events == options_.fault_drop_event_batch) {
      KVFLEET_LOG_WARN("fault injection: event batch {} ({} events) dropped", sequence, batch.events_size());
      last_sent = now;
      continue;
    }
    if (!stream->Write(batch)) break;
    last_sent = now;
  }
  stream->WritesDone();
  context.TryCancel();  // ends the reader's Read
  reader.join();
  const grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    session_context_ = nullptr;
    state_ = State::kDisconnected;
    pending_.clear();
  }
  connected_ = false;
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    KVFLEET_LOG_WARN("KV event stream to {} ended: {}; reconnecting", options_.cachemanager_address,
                     status.error_message());
  }
  return std::chrono::steady_clock::now() - started >=
         std::chrono::milliseconds(std::max(registered.liveness_deadline_ms(), 1));
}

}  // namespace kvfleet::worker
