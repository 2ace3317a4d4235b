#include "services/worker/transfer/kv_transfer_service.h"

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/transport/grpc/grpc_status.h"
#include "services/worker/transfer/kv_transfer_convert.h"

namespace kvfleet::worker {

engine::KvTransferIdentity KvTransferIdentityOf(const engine::ExecutorInfo& info, const std::string& model_id,
                                                const std::string& kv_dtype) {
  return {.model_id = model_id,
          .numerics = info.numerics,
          .kv_dtype = kv_dtype,
          .block_size = info.block_size,
          .block_bytes = info.kv_block_bytes,
          .page_groups = engine::DescribeKvPageGroups(info.kv_groups.layers_per_page, info.kv_groups.group_window),
          .tensor_parallel = info.tensor_parallel};
}

KvTransferService::KvTransferService(KvTransferServiceOptions options) : options_(std::move(options)) {}

KvTransferService::KvTransferService(engine::Engine& engine, engine::KvTransferIdentity identity,
                                     KvTransferServiceOptions options)
    : KvTransferService(std::move(options)) {
  Serve(engine, std::move(identity));
}

void KvTransferService::Serve(engine::Engine& engine, engine::KvTransferIdentity identity) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  engine_ = &engine;
  identity_ = std::move(identity);
}

void KvTransferService::Stop() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  engine_ = nullptr;
}

grpc::Status KvTransferService::PullBlocks(grpc::ServerContext* context, const v1::PullBlocksRequest* request,
                                           grpc::ServerWriter<v1::PullBlocksResponse>* writer) {
  std::shared_lock<std::shared_mutex> serving(mu_);
  if (engine_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this worker is not serving KV blocks (loading or stopping)");
  }
  absl::StatusOr<std::vector<BlockHash>> hashes = HashesFromProto(*request, options_.max_blocks_per_pull);
  if (!hashes.ok()) return transport::ToGrpcStatus(hashes.status());
  // This worker's identity under the adapter the pull names: the blocks'
  // hashes are salted with it, and the answer repeats it.
  const engine::KvTransferIdentity pulled = FromProto(request->identity());
  if (absl::Status s = engine::CheckKvAdapterIdentity(pulled.adapter); !s.ok()) return transport::ToGrpcStatus(s);
  engine::KvTransferIdentity ours = identity_;
  ours.adapter = pulled.adapter;
  if (absl::Status s = engine::CheckKvTransferCompatible(ours, pulled); !s.ok()) return transport::ToGrpcStatus(s);
  if (in_flight_.fetch_add(1) >= options_.max_concurrent_pulls) {
    in_flight_.fetch_sub(1);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("this worker serves ", options_.max_concurrent_pulls,
                                     " KV pulls at once; compute the prefix instead"));
  }
  struct Release {
    std::atomic<int32_t>& n;
    ~Release() { n.fetch_sub(1); }
  } release{in_flight_};

  // The engine copies at its next step; the promise outlives a pull that
  // gives up waiting.
  auto copied = std::make_shared<std::promise<std::vector<engine::KvBlockBytes>>>();
  std::future<std::vector<engine::KvBlockBytes>> ready = copied->get_future();
  engine_->ExportKvBlocks(
      std::move(*hashes), [copied](std::vector<engine::KvBlockBytes> blocks) { copied->set_value(std::move(blocks)); },
      request->lease_id().substr(0, 128));
  if (ready.wait_for(options_.export_deadline) != std::future_status::ready) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the engine did not copy the blocks out in time");
  }
  std::vector<engine::KvBlockBytes> blocks;
  try {
    blocks = ready.get();
  } catch (const std::future_error&) {  // the engine stopped with the export queued
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this worker stopped before copying the blocks out");
  }

  v1::PullBlocksResponse message;
  if (options_.fault == "forget-adapter") ours.adapter.clear();
  ToProto(ours, message.mutable_identity());
  if (!writer->Write(message)) return grpc::Status(grpc::StatusCode::CANCELLED, "the puller went away");
  if (options_.fault == "stall") {
    // A peer that hangs mid-pull (or is killed in it: the chaos case).
    for (int i = 0; i < 30 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const uint64_t max_chunk = request->max_chunk_bytes() == 0
                                 ? options_.max_chunk_bytes
                                 : std::min<uint64_t>(request->max_chunk_bytes(), options_.max_chunk_bytes);
  for (const engine::KvBlockBytes& b : blocks) {
    std::vector<engine::KvBlockChunk> chunks = engine::SplitKvBlock(b.hash, b.parent, b.published, b.bytes, max_chunk);
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the puller went away");
      message.Clear();
      ToProto(chunks[i], message.mutable_chunk());
      if (i == 0 && options_.fault == "corrupt-chunk") {
        std::string& data = *message.mutable_chunk()->mutable_data();
        data[data.size() / 2] = static_cast<char>(data[data.size() / 2] ^ 0x5a);
      }
      if (i == 0 && options_.fault == "truncate-block") {
        std::string& data = *message.mutable_chunk()->mutable_data();
        data.resize(data.size() / 2);
        writer->Write(message);
        return grpc::Status::OK;  // ends inside the block, as a cut connection looks
      }
      if (!writer->Write(message)) return grpc::Status(grpc::StatusCode::CANCELLED, "the puller went away");
    }
  }
  return grpc::Status::OK;
}

grpc::Status KvTransferService::RenewLease(grpc::ServerContext*, const v1::RenewLeaseRequest* request,
                                           v1::RenewLeaseResponse*) {
  std::shared_lock<std::shared_mutex> serving(mu_);
  if (engine_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this worker holds no leases (loading or stopping)");
  }
  if (request->lease_id().empty() || request->lease_id().size() > 128) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("a lease id has 1 to 128 bytes, not ", request->lease_id().size()));
  }
  engine_->RenewKvLease(request->lease_id());
  return grpc::Status::OK;
}

}  // namespace kvfleet::worker
