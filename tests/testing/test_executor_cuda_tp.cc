// test_executor.h's GPU implementation split across tensor-parallel ranks:
// CUDA executors on GPUs 0 and 1 (KVFLEET_TEST_TENSOR_PARALLEL says more),
// meeting over NCCL, through the one factory. A binary that links it skips
// every test, saying why, on a machine with fewer GPUs.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/test_executor.h"

namespace kvfleet::testing {
namespace {

class RequiresGpus : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    const int gpus = engine::CudaDeviceCount(&why);
    if (gpus < TestTensorParallel()) {
      GTEST_SKIP() << "no GPU to run the CUDA backend on: a split across " << TestTensorParallel()
                   << " ranks needs as many GPUs, and this machine has " << gpus << (gpus == 0 ? " (" + why + ")" : "");
    }
  }
};

[[maybe_unused]] const bool kRegistered = (::testing::AddGlobalTestEnvironment(new RequiresGpus), true);

}  // namespace

int32_t TestTensorParallel() { return TensorParallelFromEnvironment(); }

std::string TestBackendName() { return absl::StrCat("cuda-tp", TestTensorParallel()); }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) {
  return TensorParallelShape(ShapeFromEnvironment(base, true), TestTensorParallel());
}

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{.kind = engine::DeviceKind::kCuda, .index = 0};
  options.tensor_parallel = TestTensorParallel();
  absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> ex = engine::CreateExecutor(model, options);
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
