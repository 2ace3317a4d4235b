#include <string>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/test_executor.h"

namespace kvfleet::testing {

int32_t TestTensorParallel() { return TensorParallelFromEnvironment(); }

std::string TestBackendName() { return absl::StrCat("cpu-tp", TestTensorParallel()); }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) {
  return TensorParallelShape(ShapeFromEnvironment(base, false), TestTensorParallel());
}

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{};
  options.tensor_parallel = TestTensorParallel();
  absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> ex = engine::CreateExecutor(model, options);
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
