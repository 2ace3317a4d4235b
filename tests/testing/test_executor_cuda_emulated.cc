// test_executor.h's CUDA-on-the-host-emulation implementation.
#include "common/check.h"
#include "engine/executor/cuda/cuda_executor.h"
#include "tests/testing/test_executor.h"

namespace kvfleet::testing {

std::string TestBackendName() { return "cuda-emulated"; }

int32_t TestTensorParallel() { return 1; }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) { return ShapeFromEnvironment(base, false); }

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{.kind = engine::DeviceKind::kCuda, .index = 0};
  auto ex = engine::CudaExecutor::Create(model, options);
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
