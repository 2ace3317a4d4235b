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
  for (Pull& p : left) p.done({}, absl::CancelledError("the worker is stopping"));
  for (std::thread& t : threads_) t.join();
}

void KvPeerClient::Fetch(const std::string& endpoint, std::vector<BlockHash> hashes, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ && static_cast<int32_t>(queue_.size()) < options_.max_queued_pulls) {
      queue_.push_back({endpoint, std::move(hashes), std::move(done)});
      ready_.notify_one();
      return;
    }
  }
  done({}, absl::ResourceExhaustedError(
               absl::StrCat(options_.max_queued_pulls, " KV pulls already wait; computing the prefix instead")));
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
  v1::PullBlocksRequest request;
  ToProto(options_.identity, request.mutable_identity());
  for (const BlockHash& h : pull.hashes) request.add_block_hashes(h.ToBytes());
  request.set_max_chunk_bytes(options_.max_chunk_bytes);
  engine::KvBlockAssembler assembler(pull.hashes, static_cast<uint64_t>(options_.identity.block_bytes));
  std::vector<engine::KvBlockBytes> blocks;
  absl::Status failure;
  const std::unique_ptr<grpc::ClientReader<v1::PullBlocksResponse>> reader = stub->PullBlocks(&context, request);
  v1::PullBlocksResponse message;
  bool identified = false;
  while (failure.ok() && reader->Read(&message)) {
    if (message.has_identity()) {
      failure = identified ? absl::DataLossError("the peer sent its identity twice")
                           : engine::CheckKvTransferCompatible(options_.identity, FromProto(message.identity()));
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
  pull.done(std::move(blocks), failure);
}

}  // namespace kvfleet::worker
