#include "services/worker/server/kv_event_publisher.h"

#include <random>

#include "common/logging.h"
#include "services/transport/grpc/grpc_channel.h"
#include "services/transport/wire/kv_tier_convert.h"
#include "services/transport/wire/load_report_convert.h"
#include "services/worker/server/proto_convert.h"

namespace kvfleet::worker {

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)),
      incarnation_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)),
      buffer_(options_.fault_drop_event_batch) {}

KvEventPublisher::~KvEventPublisher() { Stop(); }

namespace {

void AddHashes(const std::vector<BlockHash>& hashes, google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const BlockHash& h : hashes) *out->Add() = h.ToBytes();
}

v1::KvEvent ToProto(const PublishedEvent& e) {
  v1::KvEvent out;
  switch (e.kind) {
    case PublishedEvent::Kind::kStored: {
      v1::BlockStored* stored = out.mutable_stored();
      AddHashes(e.hashes, stored->mutable_hashes());
      if (e.parent) stored->set_parent(e.parent->ToBytes());
      stored->set_tier(transport::ToProto(e.tier));
      break;
    }
    case PublishedEvent::Kind::kRemoved:
      AddHashes(e.hashes, out.mutable_removed()->mutable_hashes());
      break;
    case PublishedEvent::Kind::kCleared:
      out.mutable_cleared();
      break;
    case PublishedEvent::Kind::kSnapshot: {
      v1::Snapshot* snapshot = out.mutable_snapshot();
      AddHashes(e.hashes, snapshot->mutable_hashes());
      for (const std::optional<BlockHash>& parent : e.parents) {
        *snapshot->add_parents() = parent ? parent->ToBytes() : "";
      }
      break;
    }
  }
  return out;
}

}  // namespace

void KvEventPublisher::AwaitSnapshot() {
  if (buffer_.RequestSnapshot()) engine_->RequestKvSnapshot();
}

void KvEventPublisher::Start(engine::Engine& engine, std::function<bool()> draining, const AdmittedTickets* admitted) {
  engine_ = &engine;
  draining_ = std::move(draining);
  admitted_ = admitted;
  thread_ = std::thread([this] { Run(); });
}

void KvEventPublisher::NotifyLoadChanged() { buffer_.NotifyLoadChanged(); }

void KvEventPublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (session_context_ != nullptr) session_context_->TryCancel();
  }
  buffer_.Stop();
  if (thread_.joinable()) thread_.join();
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
    if (!buffer_.Sleep(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

v1::EventBatch KvEventPublisher::ToWire(const OutgoingBatch& outgoing) const {
  v1::EventBatch batch;
  batch.set_worker_id(options_.worker_id);
  batch.set_incarnation(incarnation_);
  batch.set_sequence(outgoing.sequence);
  for (const PublishedEvent& e : outgoing.events) *batch.add_events() = ToProto(e);
  // The tickets before the stats (LoadOf says why).
  const std::vector<v1::PlacementTicket> admitted =
      admitted_ != nullptr ? admitted_->Snapshot() : std::vector<v1::PlacementTicket>{};
  *batch.mutable_load() = transport::ToProto(LoadOf(engine_->Stats(), draining_ && draining_(), admitted));
  return batch;
}

bool KvEventPublisher::Session() {
  auto stub =
      v1::CacheManager::NewStub(transport::CreateClientChannel(options_.cachemanager_address, options_.channel));
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
  request.set_role(options_.role);
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
    if (status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
      // Not a network fault: this worker is left out of the cluster until
      // the other one goes, so say so every time.
      KVFLEET_LOG_ERROR("the cachemanager at {} refused this worker: {}", options_.cachemanager_address,
                        status.error_message());
      return false;
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
  const auto started = std::chrono::steady_clock::now();
  buffer_.Connect(started);
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

  while (buffer_.Wait(options_.flush_interval)) {
    const std::optional<OutgoingBatch> batch = buffer_.NextBatch(std::chrono::steady_clock::now(), heartbeat);
    if (!batch) continue;
    if (batch->dropped) {
      KVFLEET_LOG_WARN("fault injection: event batch {} ({} events) dropped", batch->sequence, batch->events.size());
      continue;
    }
    if (!stream->Write(ToWire(*batch))) break;
  }
  stream->WritesDone();
  context.TryCancel();  // ends the reader's Read
  reader.join();
  const grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    session_context_ = nullptr;
  }
  buffer_.Disconnect();
  connected_ = false;
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    KVFLEET_LOG_WARN("KV event stream to {} ended: {}; reconnecting", options_.cachemanager_address,
                     status.error_message());
  }
  return std::chrono::steady_clock::now() - started >=
         std::chrono::milliseconds(std::max(registered.liveness_deadline_ms(), 1));
}

}  // namespace kvfleet::worker
