#include "tests/testing/test_executor.h"

#include "common/check.h"
#include "engine/executor/executor_factory.h"

namespace kvfleet::testing {

std::string TestBackendName() { return "cpu"; }

int32_t TestTensorParallel() { return 1; }

tools::TinyModelOptions TestModelShape(tools::TinyModelOptions base) { return ShapeFromEnvironment(base, false); }

std::unique_ptr<engine::ModelExecutor> NewExecutor(const model::Model& model, engine::ExecutorOptions options) {
  options.device = engine::Device{};
  absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> ex = engine::CreateExecutor(model, options);
  CHECK(ex.ok()) << ex.status();
  return std::move(*ex);
}

}  // namespace kvfleet::testing
