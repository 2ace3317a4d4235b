// The base of the engine suites that share one tiny model per suite: the
// model is written and loaded once in SetUpTestSuite (TestModelShape: the
// tiny shape on the CPU and the emulation, SmolLM2's on a GPU) and freed
// after the suite's last test.
//
//   class EngineTest : public TinyModelSuite {
//    protected:
//     static void SetUpTestSuite() { LoadTinyModel({.dtype = DType::kQ8_0, .seed = 21}); }
//   };
#ifndef KVFLEET_TESTS_UNIT_ENGINE_TINY_MODEL_SUITE_H_
#define KVFLEET_TESTS_UNIT_ENGINE_TINY_MODEL_SUITE_H_

#include <gtest/gtest.h>

#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {

class TinyModelSuite : public ::testing::Test {
 protected:
  // Writes the model of `options` (in the test shape) to dir_/t.gguf and
  // loads it as model_. For a suite's SetUpTestSuite.
  static void LoadTinyModel(tools::TinyModelOptions options) {
    dir_ = new kvfleet::testing::TempDir();
    ASSERT_TRUE(tools::WriteTinyModel(kvfleet::testing::TestModelShape(options), dir_->Path("t.gguf")).ok());
    model_ = model::Model::Load(dir_->Path("t.gguf"))->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
    model_ = nullptr;
    dir_ = nullptr;
  }

  // One suite runs at a time, so the suites share these two.
  static inline kvfleet::testing::TempDir* dir_ = nullptr;
  static inline model::Model* model_ = nullptr;
};

}  // namespace kvfleet::engine

#endif  // KVFLEET_TESTS_UNIT_ENGINE_TINY_MODEL_SUITE_H_
