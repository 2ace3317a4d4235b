#include "engine/executor/cuda/cuda_ranks.h"

#include "engine/executor/cuda/cuda_executor.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

absl::StatusOr<std::unique_ptr<ModelExecutor>> CudaRanks::CreateRank(const model::Model& shard,
                                                                     const ExecutorOptions& options, int32_t rank,
                                                                     Collective& collective) {
  ExecutorOptions on_device = options;
  on_device.device.index += rank;
  auto executor = CudaExecutor::Create(shard, on_device, &collective);
  if (!executor.ok()) return executor.status();
  return std::unique_ptr<ModelExecutor>(std::move(*executor));
}

std::string CudaRanks::Numerics(const ExecutorOptions& options) const {
  const absl::StatusOr<std::string> numerics = CudaExecutor::NumericsFor(options);
  return numerics.ok() ? *numerics : "cuda-unknown";
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
