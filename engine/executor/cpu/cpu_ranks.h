// The CPU's ranks of a tensor-parallel replica (tensor_parallel_executor.h):
// one CpuExecutor per rank over its shard, all on one thread pool, which
// they share because they take turns. The CPU twin of a GPU replica.
//
//   ASSIGN_OR_RETURN(auto tp, TensorParallelExecutor::Create(model, options,
//                                                            std::make_unique<CpuRanks>(options.num_threads)));
#pragma once

#include <memory>
#include <string>

#include "common/thread_pool.h"
#include "engine/executor/tensor_parallel_executor.h"

namespace kvfleet::engine {

class CpuRanks : public RankBackend {
 public:
  explicit CpuRanks(int num_threads) : pool_(num_threads) {}

  absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateRank(const model::Model& shard, const ExecutorOptions& options,
                                                            int32_t rank, Collective& collective) override;
  std::string Numerics(const ExecutorOptions& options) const override;

 private:
  ThreadPool pool_;
};

}  // namespace kvfleet::engine
