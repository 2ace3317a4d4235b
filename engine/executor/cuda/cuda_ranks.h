// CUDA's ranks of a tensor-parallel replica (tensor_parallel_executor.h):
// one CudaExecutor per rank over its shard, rank r on device (the asked
// index + r). On the host emulation the ranks take turns and meet through
// the replica's in-process group (emulated device memory is host memory,
// which its sum reads). On GPUs they run at once and meet over NCCL
// (nccl_collective.h): built, and not yet run on a GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/executor/tensor_parallel_executor.h"
#include "kernels/cuda/stream.h"  // KVFLEET_CUDA_BUILD: which build this is

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

class CudaRanks : public RankBackend {
 public:
  CudaRanks();  // ranks in turn, through the in-process group (the emulation)
  ~CudaRanks() override;
#if !defined(KVFLEET_CUDA_EMULATION)
  // GPUs first_device .. first_device + degree − 1, meeting over NCCL.
  // FAILED_PRECONDITION naming what is missing: GPUs, or NCCL.
  static absl::StatusOr<std::unique_ptr<CudaRanks>> OverNccl(int first_device, int32_t degree);
#endif

  absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateRank(const model::Model& shard, const ExecutorOptions& options,
                                                            int32_t rank, Collective& collective) override;
  std::string Numerics(const ExecutorOptions& options) const override;
  Collective* OwnCollective(int32_t rank) override;
  bool RanksShareMemory() const override { return false; }  // a device each

 private:
  std::vector<std::unique_ptr<Collective>> nccl_;  // a rank's each, on GPUs (cuda_ranks_nccl.cc)
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
