// test_executor.h's CUDA-on-the-host-emulation implementation split across
// tensor-parallel ranks, one emulated device each (2 unless
// KVFLEET_TEST_TENSOR_PARALLEL says otherwise).

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "engine/executor/cuda/cuda_ranks.h"
#include "engine/executor/tensor_parallel_executor.h"
#include "tests/testing/test_executor.h"

namespace kvfleet::testing {

int32_t TestTensorParallel() { return TensorParallelFromEnvironment(); }

std::string TestBackendName() { return absl::StrCat("cuda-emulated-tp", TestTensorParallel()); }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) {
  return TensorParallelShape(ShapeFromEnvironment(base, false), TestTensorParallel());
}

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{.kind = engine::DeviceKind::kCuda, .index = 0};
  options.tensor_parallel = TestTensorParallel();
  auto ex = engine::TensorParallelExecutor::Create(model, options, std::make_unique<engine::CudaRanks>());
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
