// The executor backend interface: runs the model's forward pass for a batch
// of sequence chunks over a paged KV cache that the executor owns physically
// (host memory for the CPU backend, device memory for CUDA). Which blocks a
// sequence uses is decided by the caller (the block pool); the executor only
// reads and writes the blocks it is told to.
//
// Thread-safety: one thread at a time (the engine thread).
//
//   std::unique_ptr<ModelExecutor> ex = ...;
//   ASSIGN_OR_RETURN(ForwardOutput out, ex->Forward(batch));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "services/worker/engine/executor/forward_batch.h"

namespace kvfleet::engine {

struct ExecutorInfo {
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  int64_t num_layers = 0;
  int64_t weight_bytes = 0;  // what a forward pass reads: the cost of a step relative to another model's
  int64_t kv_bytes_per_token = 0;  // DESIGN.md formula at the cache's storage type
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  virtual const ExecutorInfo& info() const = 0;
  // INVALID_ARGUMENT for a token outside the vocabulary, a position past the
  // context, a block table that does not cover the chunk, or num_layers
  // outside [0, info().num_layers].
  virtual absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) = 0;
};

}  // namespace kvfleet::engine
