#include "engine/executor/cpu/cpu_ranks.h"

#include "engine/executor/cpu/cpu_executor.h"

namespace kvfleet::engine {

absl::StatusOr<std::unique_ptr<ModelExecutor>> CpuRanks::CreateRank(const model::Model& shard,
                                                                    const ExecutorOptions& options, int32_t,
                                                                    Collective& collective) {
  if (options.device.kind != DeviceKind::kCpu) {
    return absl::InvalidArgumentError("the CPU's ranks run on the CPU, not " + options.device.ToString());
  }
  auto rank = CpuExecutor::Create(shard, options, {.collective = &collective, .shared_pool = &pool_});
  if (!rank.ok()) return rank.status();
  return std::unique_ptr<ModelExecutor>(std::move(*rank));
}

std::string CpuRanks::Numerics(const ExecutorOptions& options) const { return CpuNumericsFor(options); }

}  // namespace kvfleet::engine
