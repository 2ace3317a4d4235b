#include "engine/executor/cuda/cuda_ranks.h"

#include "absl/strings/str_cat.h"
#include "engine/executor/cuda/cuda_executor.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

CudaRanks::CudaRanks() = default;
CudaRanks::~CudaRanks() = default;

Collective* CudaRanks::OwnCollective(int32_t rank) {
  return nccl_.empty() ? nullptr : nccl_[static_cast<size_t>(rank)].get();
}

absl::StatusOr<std::unique_ptr<ModelExecutor>> CudaRanks::CreateRank(const model::Model& shard,
                                                                     const ExecutorOptions& options, int32_t rank,
                                                                     Collective& collective) {
  for (const model::LayerWeights& l : shard.weights().layers) {
    if (l.attn_q_norm.present() && l.attn_q_norm.cols != shard.config().head_dim) {
      return absl::UnimplementedError(
          absl::StrCat("tensor '", l.attn_q_norm.name,
                       "' normalises every head together: the norm across ranks it needs is built on the CPU, not on "
                       "CUDA; run this model with --tensor-parallel 1 on a GPU"));
    }
  }
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
