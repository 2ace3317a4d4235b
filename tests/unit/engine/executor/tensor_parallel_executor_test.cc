// A tensor-parallel replica as one executor (the CPU's ranks, through the
// factory): its identity names the split, its blocks are the ranks' pieces side by side (so a
// block copied out of one replica and into another gives the same
// tokens), its cache's bytes are the ranks' sum, and a degree that cannot
// split the model, or GPUs the machine does not have, is refused with what
// would work.
#include "engine/executor/tensor_parallel_executor.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class TensorParallelExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 4 query heads of 32 over 2 KV heads: splits at 2, and at 4 with each
    // KV head on two ranks (a query head is one 32-value block of Wo).
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 9, .hidden_size = 128, .ffn_size = 256},
                                      dir_.Path("t.gguf"))
                    .ok());
    auto m = model::Model::Load(dir_.Path("t.gguf"));
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  absl::StatusOr<std::unique_ptr<ModelExecutor>> Make(int32_t degree, int64_t blocks = 16) const {
    return CreateExecutor(*model_,
                          {.num_blocks = blocks, .block_size = 4, .num_threads = 2, .tensor_parallel = degree});
  }

  // The logits of decoding `next` after `prompt` sits in `blocks`.
  static std::vector<float> Decode(ModelExecutor& ex, const std::vector<model::TokenId>& prompt, model::TokenId next,
                                   const std::vector<BlockId>& blocks) {
    ForwardBatchBuilder b(4);
    const std::vector<model::TokenId> token = {next};
    b.AddChunk(token, static_cast<int32_t>(prompt.size()), blocks, LogitsWanted::kLast);
    auto out = ex.Forward(b.Finish());
    EXPECT_TRUE(out.ok()) << out.status();
    return {out->logits, out->logits + out->vocab_size};
  }

  testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
};

TEST_F(TensorParallelExecutorTest, NamesItsSplitAndSumsTheRanksCaches) {
  auto whole = Make(1), tp = Make(2);
  ASSERT_TRUE(whole.ok() && tp.ok()) << tp.status();
  const ExecutorInfo& a = (*whole)->info();
  const ExecutorInfo& b = (*tp)->info();
  EXPECT_EQ(b.numerics, a.numerics + "+tp2");
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  // Two KV heads, one a rank: the same bytes, split.
  EXPECT_EQ(b.kv_block_bytes, a.kv_block_bytes);
  EXPECT_EQ(b.kv_bytes_per_token, a.kv_bytes_per_token);
  EXPECT_EQ((*tp)->memory().kv_cache_bytes, (*whole)->memory().kv_cache_bytes);
  // Four ranks replicate each KV head twice: twice the bytes.
  auto tp4 = Make(4);
  ASSERT_TRUE(tp4.ok()) << tp4.status();
  EXPECT_EQ((*tp4)->info().kv_block_bytes, 2 * a.kv_block_bytes);
}

TEST_F(TensorParallelExecutorTest, ABlockCopiedToAnotherReplicaGivesTheSameLogits) {
  auto from = Make(2), to = Make(2);
  ASSERT_TRUE(from.ok() && to.ok());
  const std::vector<model::TokenId> prompt = {5, 17, 99, 4, 250, 31, 8};
  ForwardBatchBuilder b(4);
  const std::vector<BlockId> blocks = {BlockId(0), BlockId(1)};
  b.AddChunk(prompt, 0, blocks, LogitsWanted::kLast);
  ASSERT_TRUE((*from)->Forward(b.Finish()).ok());
  std::vector<uint8_t> block(static_cast<size_t>((*from)->info().kv_block_bytes));
  for (int32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE((*from)->CopyKvBlockOut(BlockId(i), block).ok());
    ASSERT_TRUE((*to)->CopyKvBlockIn(BlockId(9 + i), block).ok());
  }
  EXPECT_EQ(Decode(**from, prompt, 12, {BlockId(0), BlockId(1)}), Decode(**to, prompt, 12, {BlockId(9), BlockId(10)}));
}

// A rank failing mid-step, first, middle or last: no rank waits forever
// for it, the step fails naming it, and every later step fails the same
// way (the ranks' caches no longer agree). A batch every rank would refuse
// is refused up front and faults nothing.
TEST_F(TensorParallelExecutorTest, ARankThatFailsMidStepFaultsTheReplicaForGood) {
  for (const int32_t degree : {2, 4}) {
    for (int32_t failing = 0; failing < degree; ++failing) {
      SCOPED_TRACE(::testing::Message() << "rank " << failing << " of " << degree);
      auto ex = CreateExecutor(*model_, {.num_blocks = 16,
                                         .block_size = 4,
                                         .num_threads = 2,
                                         .tensor_parallel = degree,
                                         .rank_fault = {.rank = failing, .at_step = 2}});
      ASSERT_TRUE(ex.ok()) << ex.status();
      ForwardBatchBuilder b(4);
      const std::vector<model::TokenId> prompt = {5, 17, 99};
      const std::vector<BlockId> blocks = {BlockId(0)};
      b.AddChunk(prompt, 0, blocks, LogitsWanted::kLast);
      const ForwardBatch batch = b.Finish();
      ASSERT_TRUE((*ex)->Forward(batch).ok());
      EXPECT_TRUE((*ex)->Fault().ok());
      ForwardBatch beyond = batch;
      beyond.token_ids[0] = 1 << 20;  // outside the vocabulary: refused, no rank involved
      EXPECT_FALSE((*ex)->Forward(beyond).ok());
      EXPECT_TRUE((*ex)->Fault().ok());
      const auto failed = (*ex)->Forward(batch);
      ASSERT_FALSE(failed.ok());
      const std::string named = absl::StrCat("tensor-parallel rank ", failing, " of ", degree, " failed mid-step");
      EXPECT_NE(failed.status().message().find(named), std::string::npos) << failed.status();
      EXPECT_EQ((*ex)->Fault(), failed.status());
      EXPECT_EQ((*ex)->Forward(batch).status(), failed.status());
    }
  }
}

TEST_F(TensorParallelExecutorTest, ADegreeThatCannotSplitTheModelIsRefusedWithTheOnesThatCan) {
  auto tp3 = Make(3);
  ASSERT_FALSE(tp3.ok());
  EXPECT_EQ(tp3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tp3.status().message().find("Degrees that can: 1, 2, 4"), std::string::npos) << tp3.status();
}

TEST_F(TensorParallelExecutorTest, ASplitAcrossGpusThisMachineLacksIsRefusedSayingWhatToDo) {
  auto gpu = CreateExecutor(*model_, {.device = {.kind = DeviceKind::kCuda}, .tensor_parallel = 2});
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("--device cpu"), std::string::npos) << gpu.status();
}

}  // namespace
}  // namespace kvfleet::engine
