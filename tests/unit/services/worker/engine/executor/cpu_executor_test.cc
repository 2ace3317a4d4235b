// The CPU executor's exactness: a sequence's logits are bit-identical alone
// or batched with others, prefilled whole or in chunks, and wherever its
// blocks sit in the cache; and its refusals name the problem.
#include "services/worker/engine/executor/cpu/cpu_executor.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class CpuExecutorTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("tiny.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = GetParam(), .seed = 11}, path).ok());
    auto m = model::LlamaModel::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  std::unique_ptr<CpuExecutor> NewExecutor(int threads) {
    auto ex = CpuExecutor::Create(*model_, {.num_blocks = 64, .block_size = 4, .num_threads = threads});
    EXPECT_TRUE(ex.ok()) << ex.status();
    return std::move(*ex);
  }

  static std::vector<BlockId> Blocks(std::initializer_list<int32_t> ids) {
    std::vector<BlockId> out;
    for (int32_t id : ids) out.emplace_back(id);
    return out;
  }

  static std::vector<model::TokenId> Tokens(int n, int salt) {
    std::vector<model::TokenId> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 37 + salt * 101) % 280;
    return t;
  }

  // Rows [first, first + n) of the last output, copied out (the view lasts
  // only until the next Forward).
  static std::vector<float> Rows(const ForwardOutput& out, int64_t first, int64_t n) {
    return {out.logits + first * out.vocab_size, out.logits + (first + n) * out.vocab_size};
  }

  testing::TempDir dir_;
  std::unique_ptr<model::LlamaModel> model_;
};

TEST_P(CpuExecutorTest, BatchedChunkedAndRelocatedGiveIdenticalLogits) {
  const auto a = Tokens(13, 1), b = Tokens(5, 2), c = Tokens(9, 3);

  // Each sequence alone, whole prefill, blocks in order.
  auto ex = NewExecutor(1);
  ForwardBatchBuilder builder(4);
  std::vector<std::vector<float>> alone;
  for (const auto* seq : {&a, &b, &c}) {
    builder.Clear();
    builder.AddChunk(*seq, 0, Blocks({0, 1, 2, 3}), LogitsWanted::kAll);
    auto out = ex->Forward(builder.Finish());
    ASSERT_TRUE(out.ok()) << out.status();
    alone.push_back(Rows(*out, 0, static_cast<int64_t>(seq->size())));
  }

  // All three in one batch, on another thread count, in scattered blocks, with
  // sequence a prefilled in two chunks (the second batched with b and c).
  auto ex2 = NewExecutor(3);
  const auto ta = Blocks({40, 3, 17, 9}), tb = Blocks({22, 5}), tc = Blocks({63, 0, 31});
  builder.Clear();
  builder.AddChunk(std::span(a).subspan(0, 6), 0, ta, LogitsWanted::kAll);
  auto out1 = ex2->Forward(builder.Finish());
  ASSERT_TRUE(out1.ok()) << out1.status();
  std::vector<float> a_batched = Rows(*out1, 0, 6);

  builder.Clear();
  builder.AddChunk(std::span(a).subspan(6), 6, ta, LogitsWanted::kAll);
  builder.AddChunk(b, 0, tb, LogitsWanted::kAll);
  builder.AddChunk(c, 0, tc, LogitsWanted::kLast);
  const ForwardBatch& second = builder.Finish();
  auto out2 = ex2->Forward(second);
  ASSERT_TRUE(out2.ok()) << out2.status();
  ASSERT_EQ(out2->num_rows, 7 + 5 + 1);

  const std::vector<float> a_rest = Rows(*out2, second.first_logits_row(0), 7);
  a_batched.insert(a_batched.end(), a_rest.begin(), a_rest.end());
  EXPECT_EQ(a_batched, alone[0]);
  EXPECT_EQ(Rows(*out2, second.first_logits_row(1), 5), alone[1]);
  const int64_t V = out2->vocab_size;
  EXPECT_EQ(Rows(*out2, second.first_logits_row(2), 1), std::vector<float>(alone[2].end() - V, alone[2].end()));
}

TEST_P(CpuExecutorTest, RejectsBadChunksWithClearErrors) {
  auto ex = NewExecutor(1);
  ForwardBatchBuilder builder(4);
  const auto forward_error = [&](std::span<const model::TokenId> tokens, int32_t start,
                                 const std::vector<BlockId>& table) {
    builder.Clear();
    builder.AddChunk(tokens, start, table, LogitsWanted::kLast);
    return std::string(ex->Forward(builder.Finish()).status().message());
  };
  const std::vector<model::TokenId> bad_token = {1, 99999};
  EXPECT_NE(forward_error(bad_token, 0, Blocks({0})).find("99999"), std::string::npos);

  const auto ok_tokens = Tokens(8, 1);
  EXPECT_NE(forward_error(ok_tokens, 0, Blocks({0})).find("needs 2 blocks"), std::string::npos);
  EXPECT_NE(forward_error(ok_tokens, 0, Blocks({0, 100})).find("block 100"), std::string::npos);

  std::vector<BlockId> long_table;
  for (int i = 0; i < 64; ++i) long_table.emplace_back(i);
  EXPECT_NE(forward_error(ok_tokens, 250, long_table).find("context length 256"), std::string::npos);
}

TEST_P(CpuExecutorTest, BatchesPastTheLimitsAndForwardWithoutACacheAreRefused) {
  auto ex = CpuExecutor::Create(*model_, {.block_size = 4, .limits = {.max_batch_tokens = 8, .max_batch_chunks = 2}});
  ASSERT_TRUE(ex.ok()) << ex.status();
  ForwardBatchBuilder builder(4);
  builder.AddChunk(Tokens(4, 1), 0, Blocks({0}), LogitsWanted::kLast);
  EXPECT_EQ((*ex)->Forward(builder.Finish()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*ex)->AllocateKvCache(8).ok());
  EXPECT_EQ((*ex)->AllocateKvCache(8).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*ex)->Forward(builder.Finish()).ok());

  builder.Clear();
  builder.AddChunk(Tokens(9, 1), 0, Blocks({0, 1, 2}), LogitsWanted::kLast);
  const absl::Status too_long = (*ex)->Forward(builder.Finish()).status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("9 tokens"), std::string::npos) << too_long;

  builder.Clear();
  for (int32_t c = 0; c < 3; ++c) builder.AddChunk(Tokens(1, c), 0, Blocks({c}), LogitsWanted::kLast);
  EXPECT_NE((*ex)->Forward(builder.Finish()).status().message().find("3 chunks"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CpuExecutorTest, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvfleet::engine
