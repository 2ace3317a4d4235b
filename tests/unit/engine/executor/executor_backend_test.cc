// This binary's backend (tests/testing/test_executor.h: the CPU in
// engine_test, the CUDA executor in its emulated and GPU twins) behind the
// executor contract: logits bit-identical alone or batched, prefilled whole
// or in chunks, at any thread count and wherever the blocks sit; close to
// the CPU backend's on the same model; and the contract's refusals.
#include <gtest/gtest.h>

#include "engine/executor/cpu/cpu_executor.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class ExecutorBackendTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("tiny.gguf");
    ASSERT_TRUE(
        tools::WriteTinyModel(testing::TestModelShape(tools::ShapedForType({.dtype = GetParam(), .seed = 12})), path)
            .ok());
    auto m = model::Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
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
  static std::vector<float> Rows(const ForwardOutput& out, int64_t first, int64_t n) {
    return {out.logits + first * out.vocab_size, out.logits + (first + n) * out.vocab_size};
  }

  std::unique_ptr<ModelExecutor> Executor(int threads) const {
    return testing::NewExecutor(*model_, {.num_blocks = 64,
                                          .block_size = 4,
                                          .num_threads = threads,
                                          .cpu_activations = activations_,
                                          .limits = testing::kRoomyLimits});
  }

  void ExpectBatchedChunkedAndRelocatedIdentical();

  testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
  CpuActivations activations_ = CpuActivations::kF32;
};

TEST_P(ExecutorBackendTest, BatchedChunkedAndRelocatedGiveIdenticalLogits) {
  ExpectBatchedChunkedAndRelocatedIdentical();
}

// The CPU's 8-bit activation path on a model of every quantized type (each
// repacked into its panels): the same exactness.
TEST_P(ExecutorBackendTest, EightBitActivationsGiveIdenticalLogitsBatchedChunkedAndRelocated) {
  if (!testing::TestBackendName().starts_with("cpu")) GTEST_SKIP() << "8-bit activations are a CPU backend option";
  if (GetParam() == DType::kF32 || GetParam() == DType::kF16 || GetParam() == DType::kBF16) {
    GTEST_SKIP() << DTypeName(GetParam()) << " matrices stay on the float path";
  }
  activations_ = CpuActivations::kQ8;
  ExpectBatchedChunkedAndRelocatedIdentical();
}

void ExecutorBackendTest::ExpectBatchedChunkedAndRelocatedIdentical() {
  const auto a = Tokens(13, 1), b = Tokens(5, 2), c = Tokens(9, 3);
  auto ex = Executor(1);
  ForwardBatchBuilder builder(4);
  std::vector<std::vector<float>> alone;
  for (const auto* seq : {&a, &b, &c}) {
    builder.Clear();
    builder.AddChunk(*seq, 0, Blocks({0, 1, 2, 3}), LogitsWanted::kAll);
    auto out = ex->Forward(builder.Finish());
    ASSERT_TRUE(out.ok()) << out.status();
    alone.push_back(Rows(*out, 0, static_cast<int64_t>(seq->size())));
  }
  // All three in one batch in scattered blocks of a second executor, a in two
  // chunks (the second batched with b and c), then c decoded one more token.
  auto ex2 = Executor(2);
  const auto ta = Blocks({40, 3, 17, 9}), tb = Blocks({22, 5}), tc = Blocks({63, 0, 31});
  builder.Clear();
  builder.AddChunk(std::span(a).subspan(0, 6), 0, ta, LogitsWanted::kAll);
  auto out1 = ex2->Forward(builder.Finish());
  ASSERT_TRUE(out1.ok()) << out1.status();
  std::vector<float> a_batched = Rows(*out1, 0, 6);
  builder.Clear();
  builder.AddChunk(std::span(a).subspan(6), 6, ta, LogitsWanted::kAll);
  builder.AddChunk(b, 0, tb, LogitsWanted::kAll);
  builder.AddChunk(std::span(c).subspan(0, 8), 0, tc, LogitsWanted::kLast);
  const ForwardBatch& second = builder.Finish();
  auto out2 = ex2->Forward(second);
  ASSERT_TRUE(out2.ok()) << out2.status();
  const std::vector<float> a_rest = Rows(*out2, second.first_logits_row(0), 7);
  a_batched.insert(a_batched.end(), a_rest.begin(), a_rest.end());
  EXPECT_EQ(a_batched, alone[0]);
  EXPECT_EQ(Rows(*out2, second.first_logits_row(1), 5), alone[1]);
  const int64_t V = out2->vocab_size;
  EXPECT_EQ(Rows(*out2, second.first_logits_row(2), 1), std::vector<float>(alone[2].end() - 2 * V, alone[2].end() - V));
  builder.Clear();
  builder.AddChunk(std::span(c).subspan(8), 8, tc, LogitsWanted::kLast);
  auto out3 = ex2->Forward(builder.Finish());
  ASSERT_TRUE(out3.ok()) << out3.status();
  EXPECT_EQ(Rows(*out3, 0, 1), std::vector<float>(alone[2].end() - V, alone[2].end())) << "decoded";
}

TEST_P(ExecutorBackendTest, LogitsAreCloseToTheCpuBackendsAndMostlyAgreeOnTheArgmax) {
  auto cpu = CpuExecutor::Create(*model_, {.num_blocks = 64, .block_size = 4, .num_threads = 1});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto ex = testing::NewTinyExecutor(*model_, 64, 4);
  const auto tokens = Tokens(40, 5);
  std::vector<BlockId> table;
  for (int32_t i = 0; i < 10; ++i) table.emplace_back(i);
  ForwardBatchBuilder builder(4);
  builder.AddChunk(tokens, 0, table, LogitsWanted::kAll);
  auto want = (*cpu)->Forward(builder.Finish());
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> reference = Rows(*want, 0, 40);
  auto got = ex->Forward(builder.Finish());
  ASSERT_TRUE(got.ok()) << got.status();
  double err = 0, norm = 0;
  int same_argmax = 0;
  const int64_t V = got->vocab_size;
  for (int64_t r = 0; r < 40; ++r) {
    int64_t best_a = 0, best_b = 0;
    for (int64_t i = 0; i < V; ++i) {
      const double a = got->logits[r * V + i], b = reference[r * V + i];
      err += (a - b) * (a - b);
      norm += b * b;
      if (a > got->logits[r * V + best_a]) best_a = i;
      if (b > reference[r * V + best_b]) best_b = i;
    }
    same_argmax += best_a == best_b;
  }
  // Float32 arithmetic in other orders, through two layers: far below the
  // model's own rounding of K/V to float16. A tensor-parallel split sums
  // each row-parallel product in parts, one more order, on the wider model
  // that splits (TestModelShape): the CUDA emulation at 2 ranks measured up
  // to 2.6e-9 on Q6_K, the CPU's under 1e-9.
  EXPECT_LT(err / norm, testing::TestTensorParallel() > 1 ? 5e-9 : 1e-9) << testing::TestBackendName();
  EXPECT_GE(same_argmax, 38) << "rows whose greedy token agrees with the CPU's, of 40";
}

TEST_P(ExecutorBackendTest, RefusesWhatTheContractRefuses) {
  auto ex = testing::NewExecutor(*model_, {.block_size = 4, .limits = {.max_batch_tokens = 8, .max_batch_chunks = 2}});
  ForwardBatchBuilder builder(4);
  builder.AddChunk(Tokens(4, 1), 0, Blocks({0}), LogitsWanted::kLast);
  EXPECT_EQ(ex->Forward(builder.Finish()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ex->AllocateKvCache(8).ok());
  EXPECT_EQ(ex->AllocateKvCache(8).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ex->Forward(builder.Finish()).ok());
  builder.Clear();
  builder.AddChunk(Tokens(9, 1), 0, Blocks({0, 1, 2}), LogitsWanted::kLast);
  EXPECT_EQ(ex->Forward(builder.Finish()).status().code(), absl::StatusCode::kInvalidArgument);
  builder.Clear();
  for (int32_t c = 0; c < 3; ++c) builder.AddChunk(Tokens(1, c), 0, Blocks({c}), LogitsWanted::kLast);
  EXPECT_NE(ex->Forward(builder.Finish()).status().message().find("3 chunks"), std::string::npos);
  // Malformed chunks: each refusal names what is wrong.
  const auto forward_error = [&](std::span<const model::TokenId> tokens, int32_t start,
                                 const std::vector<BlockId>& table) {
    builder.Clear();
    builder.AddChunk(tokens, start, table, LogitsWanted::kLast);
    return std::string(ex->Forward(builder.Finish()).status().message());
  };
  const std::vector<model::TokenId> bad = {1, 99999};
  EXPECT_NE(forward_error(bad, 0, Blocks({0})).find("99999"), std::string::npos);
  const auto eight = Tokens(8, 1);
  EXPECT_NE(forward_error(eight, 0, Blocks({0})).find("needs 2 blocks"), std::string::npos);
  EXPECT_NE(forward_error(eight, 0, Blocks({0, 100})).find("block 100"), std::string::npos);
  std::vector<BlockId> long_table;
  for (int i = 0; i < 64; ++i) long_table.emplace_back(i % 8);
  EXPECT_NE(forward_error(std::span(eight).subspan(0, 7), 250, long_table).find("context length 256"),
            std::string::npos);
  const ExecutorMemory memory = ex->memory();
  EXPECT_GT(memory.scratch_bytes, 0);
  EXPECT_EQ(memory.kv_cache_bytes, 8 * 4 * ex->info().kv_bytes_per_token);
  EXPECT_FALSE(ex->info().numerics.empty());
}

// The same on the shape this binary's suites run on (SmolLM2-135M's on a
// GPU). Rounding differences compound layer by layer (each op agrees to
// about 1e-14; thirty random layers measured 3e-8 in the emulation), so the
// whole model's bound is looser than any one op's, and still far from the
// order-one error of a wrong kernel.
TEST(ExecutorBackendShapeTest, LogitsOnTheSuitesModelShapeAreCloseToTheCpuBackends) {
  testing::TempDir dir;
  const std::string path = dir.Path("shape.gguf");
  ASSERT_TRUE(tools::WriteTinyModel(testing::TestModelShape({.dtype = DType::kQ4_1, .seed = 13}), path).ok());
  auto model = model::Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto cpu = CpuExecutor::Create(**model, {.num_blocks = 16, .block_size = 16});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto ex = testing::NewTinyExecutor(**model, 16, 16);
  std::vector<model::TokenId> tokens(60);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<model::TokenId>((i * 131 + 7) % 280);
  std::vector<BlockId> table;
  for (int32_t i = 0; i < 4; ++i) table.emplace_back(i);
  ForwardBatchBuilder builder(16);
  builder.AddChunk(tokens, 0, table, LogitsWanted::kAll);
  auto want = (*cpu)->Forward(builder.Finish());
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> reference(want->logits, want->logits + want->num_rows * want->vocab_size);
  auto got = ex->Forward(builder.Finish());
  ASSERT_TRUE(got.ok()) << got.status();
  double err = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    err += (got->logits[i] - reference[i]) * (got->logits[i] - reference[i]);
    norm += double{reference[i]} * reference[i];
  }
  EXPECT_LT(err / norm, 1e-6) << (*model)->config().num_layers << " layers, vocabulary "
                              << (*model)->config().vocab_size << ", " << testing::TestBackendName();
  std::printf("normalised MSE of %s logits against the CPU's (%lld layers, vocabulary %lld): %.3g\n",
              testing::TestBackendName().c_str(), static_cast<long long>((*model)->config().num_layers),
              static_cast<long long>((*model)->config().vocab_size), err / norm);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ExecutorBackendTest, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvfleet::engine
