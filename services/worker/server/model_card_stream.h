// DescribeModel's stream: the worker's model card, chunk after chunk, each
// write waiting for the last (the callback API allows one in flight). The
// chunks are made once at start and shared by every stream.
//
// Thread-safety: gRPC calls the reactor's callbacks one at a time.
//
//   return new ModelCardStream(chunks);  // from WorkerService::DescribeModel
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kvfleet/v1/worker.grpc.pb.h"

namespace kvfleet::worker {

using ModelCardChunks = std::vector<v1::ModelDescriptionChunk>;

class ModelCardStream final : public grpc::ServerWriteReactor<v1::ModelDescriptionChunk> {
 public:
  explicit ModelCardStream(std::shared_ptr<const ModelCardChunks> chunks);

  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  void WriteNext();

  const std::shared_ptr<const ModelCardChunks> chunks_;
  size_t next_ = 0;
};

}  // namespace kvfleet::worker
