// test_executor.h's GPU implementation: CUDA executors on GPU 0, through the
// one factory. A binary that links it skips every test, saying why, where no
// GPU is usable.
#include <gtest/gtest.h>

#include "common/check.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/test_executor.h"

namespace kvfleet::testing {
namespace {

class RequiresGpu : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    if (engine::CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU to run the CUDA backend on: " << why;
  }
};

[[maybe_unused]] const bool kRegistered = (::testing::AddGlobalTestEnvironment(new RequiresGpu), true);

}  // namespace

std::string TestBackendName() { return "cuda"; }

int32_t TestTensorParallel() { return 1; }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) { return ShapeFromEnvironment(base, true); }

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{.kind = engine::DeviceKind::kCuda, .index = 0};
  absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> ex = engine::CreateExecutor(model, options);
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
