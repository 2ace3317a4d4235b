// A replica whose ranks each hold a device (CUDA's, here on the host
// emulation's devices) plans its KV cache by every device's room, not the
// first's alone: two devices, each holding half of every block, take about
// twice the blocks one device takes of the whole model's.
#include <gtest/gtest.h>

#include "engine/executor/cuda/cuda_executor.h"
#include "engine/executor/cuda/cuda_ranks.h"
#include "engine/executor/tensor_parallel_executor.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

TEST(TensorParallelDevicesTest, ADeviceEachCountsEveryDevicesRoom) {
  testing::TempDir dir;
  ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 4}, dir.Path("t.gguf")).ok());
  auto model = model::Model::Load(dir.Path("t.gguf"));
  ASSERT_TRUE(model.ok()) << model.status();
  const ExecutorOptions options{.device = {.kind = DeviceKind::kCuda, .index = 0}, .block_size = 16};
  double whole_blocks = 0;
  {
    auto whole = CudaExecutor::Create(**model, options);
    ASSERT_TRUE(whole.ok()) << whole.status();
    auto free = (*whole)->FreeMemory();
    ASSERT_TRUE(free.ok()) << free.status();
    whole_blocks = static_cast<double>(free->free_bytes) / static_cast<double>((*whole)->info().kv_block_bytes);
  }
  ExecutorOptions split = options;
  split.tensor_parallel = 2;
  auto tp = TensorParallelExecutor::Create(**model, split, std::make_unique<CudaRanks>());
  ASSERT_TRUE(tp.ok()) << tp.status();
  auto free = (*tp)->FreeMemory();
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_TRUE(free->excludes_own_allocations);
  const double split_blocks = static_cast<double>(free->free_bytes) / static_cast<double>((*tp)->info().kv_block_bytes);
  EXPECT_NEAR(split_blocks / whole_blocks, 2.0, 0.01) << split_blocks << " blocks split, " << whole_blocks << " whole";
}

}  // namespace
}  // namespace kvfleet::engine
