// The CPU executor's exactness: a sequence's logits are bit-identical alone
// or batched with others, prefilled whole or in chunks, and wherever its
// blocks sit in the cache.
#include "services/worker/engine/executor/cpu_executor.h"

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

  testing::TempDir dir_;
  std::unique_ptr<model::LlamaModel> model_;
};

TEST_P(CpuExecutorTest, BatchedChunkedAndRelocatedGiveIdenticalLogits) {
  const auto a = Tokens(13, 1), b = Tokens(5, 2), c = Tokens(9, 3);

  // Each sequence alone, whole prefill, blocks in order.
  auto ex = NewExecutor(1);
  std::vector<std::vector<float>> alone;
  for (const auto* seq : {&a, &b, &c}) {
    const auto table = Blocks({0, 1, 2, 3});
    ForwardBatch batch;
    batch.chunks.push_back({.tokens = *seq, .start_position = 0, .block_table = table, .logits = LogitsWanted::kAll});
    auto out = ex->Forward(batch);
    ASSERT_TRUE(out.ok()) << out.status();
    alone.push_back(out->logits);
  }

  // All three in one batch, on another thread count, in scattered blocks, with
  // sequence a prefilled in two chunks (the second batched with b and c).
  auto ex2 = NewExecutor(3);
  const auto ta = Blocks({40, 3, 17, 9}), tb = Blocks({22, 5}), tc = Blocks({63, 0, 31});
  ForwardBatch first;
  first.chunks.push_back({.tokens = std::span(a).subspan(0, 6), .start_position = 0, .block_table = ta,
                          .logits = LogitsWanted::kAll});
  auto out1 = ex2->Forward(first);
  ASSERT_TRUE(out1.ok()) << out1.status();
  ForwardBatch second;
  second.chunks.push_back({.tokens = std::span(a).subspan(6), .start_position = 6, .block_table = ta,
                           .logits = LogitsWanted::kAll});
  second.chunks.push_back({.tokens = b, .start_position = 0, .block_table = tb, .logits = LogitsWanted::kAll});
  second.chunks.push_back({.tokens = c, .start_position = 0, .block_table = tc, .logits = LogitsWanted::kLast});
  auto out2 = ex2->Forward(second);
  ASSERT_TRUE(out2.ok()) << out2.status();

  const int64_t V = out2->vocab_size;
  std::vector<float> a_batched = out1->logits;
  a_batched.insert(a_batched.end(), out2->logits.begin(), out2->logits.begin() + 7 * V);
  EXPECT_EQ(a_batched, alone[0]);
  const std::vector<float> b_batched(out2->logits.begin() + out2->first_row[1] * V,
                                     out2->logits.begin() + (out2->first_row[1] + 5) * V);
  EXPECT_EQ(b_batched, alone[1]);
  const std::vector<float> c_last(out2->logits.begin() + out2->first_row[2] * V,
                                  out2->logits.begin() + (out2->first_row[2] + 1) * V);
  EXPECT_EQ(c_last, std::vector<float>(alone[2].end() - V, alone[2].end()));
}

TEST_P(CpuExecutorTest, RejectsBadChunksWithClearErrors) {
  auto ex = NewExecutor(1);
  const auto table = Blocks({0});
  const std::vector<model::TokenId> bad_token = {1, 99999};
  ForwardBatch b1;
  b1.chunks.push_back({.tokens = bad_token, .start_position = 0, .block_table = table});
  EXPECT_NE(ex->Forward(b1).status().message().find("99999"), std::string::npos);

  const auto ok_tokens = Tokens(8, 1);
  ForwardBatch b2;
  b2.chunks.push_back({.tokens = ok_tokens, .start_position = 0, .block_table = table});
  EXPECT_NE(ex->Forward(b2).status().message().find("needs 2 blocks"), std::string::npos);

  const auto far = Blocks({0, 100});
  ForwardBatch b3;
  b3.chunks.push_back({.tokens = ok_tokens, .start_position = 0, .block_table = far});
  EXPECT_NE(ex->Forward(b3).status().message().find("block 100"), std::string::npos);

  std::vector<BlockId> long_table;
  for (int i = 0; i < 64; ++i) long_table.emplace_back(i);
  ForwardBatch b4;
  b4.chunks.push_back({.tokens = ok_tokens, .start_position = 250, .block_table = long_table});
  EXPECT_NE(ex->Forward(b4).status().message().find("context length 256"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CpuExecutorTest, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvfleet::engine

namespace kvfleet::engine {
namespace {

TEST(CpuExecutorOptionsTest, MemoryBudgetSizesThePool) {
  model::LlamaHparams hp;
  hp.num_layers = 30;
  hp.num_kv_heads = 3;
  hp.head_dim = 64;
  hp.context_length = 8192;
  auto options = CpuExecutorOptions::ForMemoryBudget(hp, int64_t{1} << 30, 16, 2);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->num_blocks, 2912);  // 2^30 / (23,040 B × 16)
  EXPECT_EQ(options->block_size, 16);
  const auto tiny = CpuExecutorOptions::ForMemoryBudget(hp, 1000, 16, 2);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("23040 bytes per token"), std::string::npos) << tiny.status();
}

}  // namespace
}  // namespace kvfleet::engine
