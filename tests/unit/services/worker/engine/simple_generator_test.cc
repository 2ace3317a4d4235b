#include "services/worker/engine/simple_generator.h"

#include <gtest/gtest.h>

#include "services/worker/engine/executor/cpu_executor.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class SimpleGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 5}, dir_.Path("t.gguf")).ok());
    model_ = std::move(*model::LlamaModel::Load(dir_.Path("t.gguf")));
    executor_ = std::move(*CpuExecutor::Create(*model_, {.num_blocks = 64, .block_size = 4, .num_threads = 2}));
  }

  GenerateResult Run(const GenerateRequest& r) {
    SimpleGenerator gen(*executor_);
    std::vector<model::TokenId> streamed;
    auto result = gen.Generate(r, [&](model::TokenId t) { streamed.push_back(t); });
    EXPECT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(streamed, result->tokens);
    return *result;
  }

  testing::TempDir dir_;
  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<CpuExecutor> executor_;
};

TEST_F(SimpleGeneratorTest, GreedyIsDeterministicAndChunkingDoesNotChangeIt) {
  GenerateRequest r{.prompt = {10, 20, 30, 40, 50, 60, 70},
                    .sampling = {.temperature = 0.0f},
                    .stopping = {.max_tokens = 16, .ignore_eos = true}};
  const auto whole = Run(r);
  EXPECT_EQ(whole.tokens.size(), 16u);
  EXPECT_EQ(whole.finish_reason, FinishReason::kLength);
  r.prefill_chunk_tokens = 3;
  EXPECT_EQ(Run(r).tokens, whole.tokens);
}

TEST_F(SimpleGeneratorTest, SeededSamplingReproducesAndSeedsDiffer) {
  GenerateRequest r{.prompt = {5, 6, 7},
                    .sampling = {.temperature = 1.0f, .seed = 99},
                    .stopping = {.max_tokens = 24, .ignore_eos = true}};
  const auto a = Run(r);
  EXPECT_EQ(Run(r).tokens, a.tokens);
  EXPECT_EQ(a.seed, 99u);
  r.sampling.seed = 100;
  EXPECT_NE(Run(r).tokens, a.tokens);
}

TEST_F(SimpleGeneratorTest, StopsAtStopTokenAndIncludesIt) {
  GenerateRequest r{
      .prompt = {5, 6, 7}, .sampling = {.temperature = 0.0f}, .stopping = {.max_tokens = 16, .ignore_eos = true}};
  const auto free_run = Run(r);
  r.stopping.stop_token_ids = {free_run.tokens[3]};
  const auto stopped = Run(r);
  // Stops at the first occurrence of that token, which may come earlier.
  const auto first = std::find(free_run.tokens.begin(), free_run.tokens.end(), free_run.tokens[3]);
  EXPECT_EQ(stopped.tokens, std::vector<model::TokenId>(free_run.tokens.begin(), first + 1));
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
}

TEST_F(SimpleGeneratorTest, RejectsBadRequestsBeforeRunning) {
  SimpleGenerator gen(*executor_);
  auto noop = [](model::TokenId) {};
  EXPECT_NE(gen.Generate({}, noop).status().message().find("prompt is empty"), std::string::npos);
  GenerateRequest over{.prompt = std::vector<model::TokenId>(200, 1), .stopping = {.max_tokens = 100}};
  const auto s = gen.Generate(over, noop).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("context length of 256"), std::string::npos) << s;
  GenerateRequest bad_temp{.prompt = {1}, .sampling = {.temperature = -1.0f}};
  EXPECT_NE(gen.Generate(bad_temp, noop).status().message().find("temperature"), std::string::npos);
  GenerateRequest bad_id{.prompt = {1, 5000}};
  EXPECT_NE(gen.Generate(bad_id, noop).status().message().find("5000"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::engine
