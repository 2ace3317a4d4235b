// The tensor-parallel shard plan: the shapes of the models kvfleet runs,
// split at the degrees CI runs them (SmolLM2 at 3, Qwen2.5-Coder-0.5B at 2,
// Gemma 3 270M at 2 and 4), unequal shares where the heads or blocks do not
// divide, and refusals that name the tensor and the degrees that work.
#include "model/arch/shard_plan.h"

#include <gtest/gtest.h>

#include <string>

namespace kvfleet::model {
namespace {

ModelConfig Shape(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t ffn, int64_t vocab) {
  ModelConfig c;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.ffn_size = ffn;
  c.vocab_size = vocab;
  c.hidden_size = heads * head_dim;
  c.num_layers = 2;
  return c;
}

const ModelConfig kSmolLm2 = Shape(9, 3, 64, 1536, 49152);
const ModelConfig kQwenCoder05 = Shape(14, 2, 64, 4864, 151936);
const ModelConfig kGemma270m = Shape(4, 1, 256, 2048, 262144);
// Qwen2.5-Coder-0.5B's Q4_K_M: attn_output in a 32-value type (896 columns
// are not whole K-quant blocks), ffn_down in K-quants.
const ShardAlignment kQwenQ4KM{
    .attn_output = 32, .ffn_down = 256, .attn_output_dtype = "Q5_0", .ffn_down_dtype = "Q4_K"};

// Every dimension covered once, in order, and each rank's query heads
// inside the groups of its KV heads.
void ExpectCovers(const ShardPlan& plan, const ModelConfig& c) {
  int64_t q = 0, f = 0, v = 0;
  const int64_t group = c.num_heads / c.num_kv_heads;
  for (const RankShare& s : plan.ranks) {
    EXPECT_EQ(s.q_head_begin, q);
    EXPECT_EQ(s.ffn_begin, f);
    EXPECT_EQ(s.vocab_begin, v);
    EXPECT_GT(s.q_heads, 0);
    EXPECT_GT(s.ffn_columns, 0);
    EXPECT_GE(s.q_head_begin, s.kv_head_begin * group);
    EXPECT_LE(s.q_head_begin + s.q_heads, (s.kv_head_begin + s.kv_heads) * group);
    q += s.q_heads;
    f += s.ffn_columns;
    v += s.vocab_rows;
  }
  EXPECT_EQ(q, c.num_heads);
  EXPECT_EQ(f, c.ffn_size);
  EXPECT_EQ(v, c.vocab_size);
}

TEST(ShardPlanTest, SmolLm2SplitsEvenlyInThreeAndUnevenlyInTwo) {
  absl::StatusOr<ShardPlan> three = PlanShards(kSmolLm2, 3, {});
  ASSERT_TRUE(three.ok()) << three.status();
  ExpectCovers(*three, kSmolLm2);
  EXPECT_EQ(three->kv_replicas, 1);
  for (const RankShare& s : three->ranks) {
    EXPECT_EQ(s.q_heads, 3);
    EXPECT_EQ(s.kv_heads, 1);
    EXPECT_EQ(s.ffn_columns, 512);
  }
  EXPECT_EQ(three->Describe(), "tp3");

  absl::StatusOr<ShardPlan> two = PlanShards(kSmolLm2, 2, {});
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectCovers(*two, kSmolLm2);
  EXPECT_EQ(two->ranks[0].kv_heads, 2);
  EXPECT_EQ(two->ranks[1].kv_heads, 1);
  EXPECT_EQ(two->max_kv_heads_per_rank(), 2);
  EXPECT_FALSE(two->even());
  EXPECT_EQ(two->Describe(), "tp2[q6,3;f768,768]");
}

TEST(ShardPlanTest, QwenCoderSplitsItsKQuantRowsOnWholeBlocks) {
  absl::StatusOr<ShardPlan> two = PlanShards(kQwenCoder05, 2, kQwenQ4KM);
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectCovers(*two, kQwenCoder05);
  EXPECT_EQ(two->ranks[0].q_heads, 7);
  EXPECT_EQ(two->ranks[1].q_heads, 7);
  // 4,864 columns are 19 blocks of 256: 10 and 9.
  EXPECT_EQ(two->ranks[0].ffn_columns, 2560);
  EXPECT_EQ(two->ranks[1].ffn_columns, 2304);
  EXPECT_EQ(two->Describe(), "tp2[q7,7;f2560,2304]");

  // Past its 2 KV heads, each is replicated and its 7 query heads split.
  absl::StatusOr<ShardPlan> four = PlanShards(kQwenCoder05, 4, kQwenQ4KM);
  ASSERT_TRUE(four.ok()) << four.status();
  ExpectCovers(*four, kQwenCoder05);
  EXPECT_EQ(four->kv_replicas, 2);
  EXPECT_EQ(four->max_kv_heads_per_rank(), 1);
  EXPECT_EQ(four->ranks[2].kv_head_begin, 1);
  EXPECT_EQ(four->ranks[0].q_heads + four->ranks[1].q_heads, 7);
}

TEST(ShardPlanTest, GemmaReplicatesItsOneKvHead) {
  for (const int32_t degree : {2, 4}) {
    absl::StatusOr<ShardPlan> plan = PlanShards(kGemma270m, degree, {.attn_output = 256, .ffn_down = 256});
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectCovers(*plan, kGemma270m);
    EXPECT_EQ(plan->kv_replicas, degree);
    for (const RankShare& s : plan->ranks) EXPECT_EQ(s.q_heads, 4 / degree);
  }
  absl::StatusOr<ShardPlan> eight = PlanShards(kGemma270m, 8, {});
  ASSERT_FALSE(eight.ok());
  EXPECT_NE(eight.status().message().find("fewer heads than ranks"), std::string::npos) << eight.status();
  EXPECT_NE(eight.status().message().find("Degrees that can: 1, 2, 3, 4"), std::string::npos) << eight.status();
}

TEST(ShardPlanTest, ARefusalNamesTheTensorTheBlocksAndTheDegreesThatWork) {
  // 8 heads of 64 in K-quant blocks of 256: a rank's heads come 4 at a time.
  const ModelConfig c = Shape(8, 8, 64, 1024, 1000);
  const ShardAlignment k{.attn_output = 256, .ffn_down = 256, .attn_output_dtype = "Q4_K", .ffn_down_dtype = "Q6_K"};
  absl::StatusOr<ShardPlan> four = PlanShards(c, 4, k);
  ASSERT_FALSE(four.ok());
  const std::string m(four.status().message());
  EXPECT_NE(m.find("--tensor-parallel 4"), std::string::npos) << m;
  EXPECT_NE(m.find("blk.*.attn_output.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("Q4_K: 256-value blocks"), std::string::npos) << m;
  EXPECT_NE(m.find("Degrees that can: 1, 2"), std::string::npos) << m;
  EXPECT_EQ(DegreesThatSplit(c, k), (std::vector<int32_t>{1, 2}));

  // A degree that neither divides nor is a multiple of the KV heads.
  absl::StatusOr<ShardPlan> three = PlanShards(kQwenCoder05, 3, kQwenQ4KM);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("blk.*.attn_k.weight"), std::string::npos) << three.status();
  EXPECT_FALSE(PlanShards(kSmolLm2, 0, {}).ok());
}

TEST(ShardPlanTest, EveryDegreeThatSplitsCoversEveryDimension) {
  for (const ModelConfig& c : {kSmolLm2, kQwenCoder05, kGemma270m}) {
    for (const int32_t degree : DegreesThatSplit(c, kQwenQ4KM)) {
      SCOPED_TRACE(degree);
      absl::StatusOr<ShardPlan> plan = PlanShards(c, degree, kQwenQ4KM);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ExpectCovers(*plan, c);
    }
  }
  EXPECT_EQ(DegreesThatSplit(kSmolLm2, {}), (std::vector<int32_t>{1, 2, 3, 6, 9}));
}

TEST(ShardPlanTest, TheAlignmentIsTheWidestBlockOverTheLayersInEitherFormat) {
  const std::vector<TensorView> tensors = {
      {.name = "blk.0.attn_output.weight", .dtype = DType::kQ5_0},
      {.name = "blk.0.ffn_down.weight", .dtype = DType::kQ4_K},
      {.name = "blk.1.attn_output.weight", .dtype = DType::kF16},
      {.name = "blk.1.ffn_down.weight", .dtype = DType::kQ6_K},
      {.name = "blk.1.ffn_gate.weight", .dtype = DType::kQ8_0},
  };
  const ShardAlignment a = ShardAlignmentOf(tensors);
  EXPECT_EQ(a.attn_output, 32);
  EXPECT_EQ(a.attn_output_dtype, "Q5_0");
  EXPECT_EQ(a.ffn_down, 256);
  EXPECT_EQ(a.ffn_down_dtype, "Q4_K");
  const std::vector<TensorView> hf = {
      {.name = "model.layers.0.self_attn.o_proj.weight", .dtype = DType::kBF16},
      {.name = "model.layers.0.mlp.down_proj.weight", .dtype = DType::kQ4_K},
  };
  const ShardAlignment b = ShardAlignmentOf(hf);
  EXPECT_EQ(b.attn_output, 32);
  EXPECT_EQ(b.ffn_down, 256);
  EXPECT_EQ(b.ffn_down_dtype, "Q4_K");
}

}  // namespace
}  // namespace kvfleet::model
