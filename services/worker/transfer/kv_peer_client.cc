#include "services/worker/transfer/kv_peer_client.h"

#include "absl/strings/str_cat.h"
#include "kvfleet/v1/kv_transfer.grpc.pb.h"
#include "services/transport/grpc/grpc_status.h"
#include "services/worker/transfer/kv_transfer_convert.h"

namespace kvfleet::worker {

KvPeerClient::KvPeerClient(KvPeerClientOptions options) : options_(std::move(options)) {
  for (int32_t i = 0; i < std::max(1, options_.max_concurrent_pulls); ++i) threads_.emplace_back([this] { Work(); });
}

KvPeerClient::~KvPeerClient() {
  std::deque<Pull> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    left.swap(queue_);
  }
  ready_.notify_all();
  for (Pull& p : left) {
    Release(p);
    p.done({}, absl::CancelledError("the worker is stopping"));
  }
  for (std::thread& t : threads_) t.join();
}

size_t KvPeerClient::ReserveLocked(const std::string& endpoint, size_t wanted) {
  const int64_t block = std::max<int64_t>(options_.identity.block_bytes, 1);
  const int64_t room = std::min(options_.max_bytes_in_flight - bytes_in_flight_,
                                options_.max_peer_bytes_in_flight - peer_bytes_in_flight_[endpoint]);
  const size_t fit = std::min<size_t>(wanted, static_cast<size_t>(std::max<int64_t>(room / block, 0)));
  bytes_in_flight_ += static_cast<int64_t>(fit) * block;
  peer_bytes_in_flight_[endpoint] += static_cast<int64_t>(fit) * block;
  return fit;
}

void KvPeerClient::Release(const Pull& pull) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_in_flight_ -= pull.bytes;
  const auto it = peer_bytes_in_flight_.find(pull.endpoint);
  if ((it->second -= pull.bytes) == 0) peer_bytes_in_flight_.erase(it);
}

void KvPeerClient::Fetch(const std::string& endpoint, const std::string& adapter, std::vector<BlockHash> hashes,
                         const std::string& lease_id, Done done) {
  absl::Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || static_cast<int32_t>(queue_.size()) >= options_.max_queued_pulls) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat(options_.max_queued_pulls, " KV pulls already wait; computing the prefix instead"));
    } else if (const size_t fit = ReserveLocked(endpoint, hashes.size()); fit == 0) {
      if (peer_bytes_in_flight_[endpoint] == 0) peer_bytes_in_flight_.erase(endpoint);
      refused = absl::ResourceExhaustedError(
          absl::StrCat("KV pulls in flight hold ", bytes_in_flight_, " bytes (at most ", options_.max_bytes_in_flight,
                       ", and ", options_.max_peer_bytes_in_flight,
                       " from one peer: --kv-transfer-max-bytes, "
                       "--kv-transfer-max-peer-bytes); computing the prefix instead"));
    } else {
      hashes.resize(fit);
      const int64_t bytes = static_cast<int64_t>(fit) * std::max<int64_t>(options_.identity.block_bytes, 1);
      queue_.push_back({endpoint, std::move(hashes), std::move(done), bytes, lease_id, adapter});
      ready_.notify_one();
      return;
    }
  }
  done({}, std::move(refused));
}

void KvPeerClient::RenewLease(const std::string& endpoint, const std::string& lease_id) {
  // Everything the call needs lives as long as the call, whatever happens
  // to this client meanwhile.
  struct Call {
    std::unique_ptr<v1::KvTransfer::Stub> stub;
    grpc::ClientContext context;
    v1::RenewLeaseRequest request;
    v1::RenewLeaseResponse response;
  };
  auto call = std::make_shared<Call>();
  call->stub = v1::KvTransfer::NewStub(ChannelTo(endpoint));
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  call->request.set_lease_id(lease_id);
  Call* raw = call.get();
  raw->stub->async()->RenewLease(&raw->context, &raw->request, &raw->response,
                                 [call = std::move(call)](grpc::Status) mutable { call.reset(); });
}

void KvPeerClient::Work() {
  while (true) {
    Pull pull;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      pull = std::move(queue_.front());
      queue_.pop_front();
    }
    Run(pull);
  }
}

std::shared_ptr<grpc::Channel> KvPeerClient::ChannelTo(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[endpoint];
  if (channel == nullptr) channel = transport::CreateClientChannel(endpoint, options_.channel);
  return channel;
}

void KvPeerClient::Run(Pull& pull) {
  const std::unique_ptr<v1::KvTransfer::Stub> stub = v1::KvTransfer::NewStub(ChannelTo(pull.endpoint));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.deadline);
  // This worker's identity, under the adapter the blocks were computed
  // with: the peer repeats it in its answer, or refuses.
  engine::KvTransferIdentity identity = options_.identity;
  identity.adapter = pull.adapter;
  v1::PullBlocksRequest request;
  ToProto(identity, request.mutable_identity());
  for (const BlockHash& h : pull.hashes) request.add_block_hashes(h.ToBytes());
  request.set_max_chunk_bytes(options_.max_chunk_bytes);
  request.set_lease_id(pull.lease_id);
  engine::KvBlockAssembler assembler(pull.hashes, static_cast<uint64_t>(options_.identity.block_bytes));
  std::vector<engine::KvBlockBytes> blocks;
  absl::Status failure;
  const std::unique_ptr<grpc::ClientReader<v1::PullBlocksResponse>> reader = stub->PullBlocks(&context, request);
  v1::PullBlocksResponse message;
  bool identified = false;
  while (failure.ok() && reader->Read(&message)) {
    if (message.has_identity()) {
      failure = identified ? absl::DataLossError("the peer sent its identity twice")
                           : engine::CheckKvTransferCompatible(identity, FromProto(message.identity()));
      identified = true;
    } else if (!identified) {
      failure = absl::DataLossError("the peer sent blocks before its identity");
    } else if (message.has_chunk()) {
      absl::StatusOr<engine::KvBlockChunk> chunk = FromProto(message.chunk());
      failure = chunk.ok() ? assembler.Add(*chunk) : chunk.status();
    }
    for (engine::KvBlockBytes& b : assembler.TakeCompleted()) blocks.push_back(std::move(b));
  }
  if (!failure.ok()) {
    context.TryCancel();
    reader->Finish().IgnoreError();
  } else {
    failure = transport::FromGrpcStatus(reader->Finish());
    if (failure.ok()) failure = assembler.Finish();
  }
  if (!failure.ok()) {
    failure = absl::Status(failure.code(), absl::StrCat("KV pull from ", pull.endpoint, ": ", failure.message()));
  }
  // The blocks are the engine's from here: they stop counting in flight.
  Release(pull);
  pull.done(std::move(blocks), failure);
}

}  // namespace kvfleet::worker
