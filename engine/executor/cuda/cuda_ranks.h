// CUDA's ranks of a tensor-parallel replica (tensor_parallel_executor.h):
// one CudaExecutor per rank over its shard, rank r on device (the asked
// index + r), meeting through the replica's in-process group. Only the host
// emulation can run it today: its device memory is host memory, which the
// group's sum reads. On GPUs the ranks need NCCL's data-movement
// collectives with kvfleet's fixed-order sum, not built yet, so the
// executor factory refuses more than one rank there.
#pragma once

#include <memory>
#include <string>

#include "engine/executor/tensor_parallel_executor.h"
#include "kernels/cuda/stream.h"  // KVFLEET_CUDA_BUILD: which build this is

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

class CudaRanks : public RankBackend {
 public:
  absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateRank(const model::Model& shard, const ExecutorOptions& options,
                                                            int32_t rank, Collective& collective) override;
  std::string Numerics(const ExecutorOptions& options) const override;
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
