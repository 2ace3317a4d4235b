// A tensor-parallel rank's config and weights, cut from a tiny model: the
// column-parallel rows viewed in place, the row-parallel columns copied
// block for block, the vocabulary's rows of a tied table, a norm over
// every head cut by heads, and a cut off a block refused.
#include "model/arch/shard_weights.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/quantize.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

std::unique_ptr<Model> TinyModel(const tools::TinyModelOptions& o, testing::TempDir& dir) {
  EXPECT_TRUE(tools::WriteTinyModel(o, dir.Path("t.gguf")).ok());
  auto m = Model::Load(dir.Path("t.gguf"));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Row r of a matrix, dequantized.
std::vector<float> Row(const WeightView& w, int64_t r) {
  std::vector<float> out(static_cast<size_t>(w.cols));
  kernels::DequantizeRow(w.dtype, static_cast<const uint8_t*>(w.data) + r * RowBytes(w.dtype, w.cols), out.data(),
                         w.cols);
  return out;
}

TEST(ShardWeightsTest, EachRankHoldsItsHeadsFeedForwardAndVocabularyRows) {
  testing::TempDir dir;
  // 6 query heads of 16 over 3 KV heads, a Q8_0 model: at 3 ranks, 2 query
  // heads (32 columns of Wo, one block) and a KV head each.
  auto m = TinyModel({.dtype = DType::kQ8_0,
                      .hidden_size = 96,
                      .num_heads = 6,
                      .num_kv_heads = 3,
                      .ffn_size = 192,
                      .tied_embeddings = true},
                     dir);
  ASSERT_NE(m, nullptr);
  auto plan = PlanShards(m->config(), 3, ShardAlignmentOf(m->source().tensors()));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const LayerWeights& whole = m->weights().layers[1];
  int64_t bytes = 0;
  for (int32_t r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    auto shard = m->Shard(*plan, r);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const RankShare& s = plan->ranks[static_cast<size_t>(r)];
    const ModelConfig& c = (*shard)->config();
    EXPECT_EQ(c.num_heads, 2);
    EXPECT_EQ(c.num_kv_heads, 1);
    EXPECT_EQ(c.ffn_size, 64);
    EXPECT_EQ(c.vocab_size, m->config().vocab_size);  // token ids stay the model's
    EXPECT_EQ(c.hidden_size, 96);
    const LayerWeights& l = (*shard)->weights().layers[1];
    // Column-parallel: the rank's rows, in place.
    EXPECT_EQ(l.attn_q.rows, 32);
    EXPECT_EQ(l.attn_q.data,
              static_cast<const uint8_t*>(whole.attn_q.data) + s.q_head_begin * 16 * RowBytes(whole.attn_q.dtype, 96));
    EXPECT_EQ(l.attn_k.rows, 16);
    EXPECT_EQ(Row(l.ffn_up, 5), Row(whole.ffn_up, s.ffn_begin + 5));
    // Row-parallel: every row's run of columns, copied.
    EXPECT_EQ(l.attn_output.cols, 32);
    EXPECT_EQ(l.ffn_down.cols, 64);
    for (int64_t row : {0, 47, 95}) {
      const std::vector<float> all = Row(whole.ffn_down, row), mine = Row(l.ffn_down, row);
      EXPECT_EQ(mine, std::vector<float>(all.begin() + s.ffn_begin, all.begin() + s.ffn_begin + 64)) << row;
    }
    // The vocabulary's rows of the tied table, for the embedding and the head.
    const DecoderWeights& w = (*shard)->weights();
    EXPECT_EQ(w.token_embd.first_row, s.vocab_begin);
    EXPECT_EQ(w.token_embd.rows, s.vocab_rows);
    EXPECT_EQ(w.output.data, w.token_embd.data);
    EXPECT_EQ(Row(w.output, 3), Row(m->weights().output, s.vocab_begin + 3));
    EXPECT_EQ((*shard)->weight_bytes(), ShardWeightBytes(w));
    bytes += (*shard)->weight_bytes();
  }
  // The ranks together hold the weights once (norms, replicated, aside).
  EXPECT_LT(bytes, m->weight_bytes() * 11 / 10);
}

// OLMo 2's query and key norms span the whole projection: a rank keeps
// its heads' values of them (its layer sequence normalises across ranks).
TEST(ShardWeightsTest, ANormOverEveryHeadKeepsTheRanksHeads) {
  testing::TempDir dir;
  auto m = TinyModel({.architecture = "olmo2", .dtype = DType::kF32}, dir);
  ASSERT_NE(m, nullptr);
  auto plan = PlanShards(m->config(), 2, ShardAlignmentOf(m->source().tensors()));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const LayerWeights& whole = m->weights().layers[0];
  const int64_t hd = m->config().head_dim;
  for (int32_t r = 0; r < 2; ++r) {
    auto shard = m->Shard(*plan, r);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const RankShare& s = plan->ranks[static_cast<size_t>(r)];
    const LayerWeights& l = (*shard)->weights().layers[0];
    EXPECT_EQ(l.attn_q_norm.cols, s.q_heads * hd);
    EXPECT_EQ(l.attn_q_norm.f32(), whole.attn_q_norm.f32() + s.q_head_begin * hd);
    EXPECT_EQ(l.attn_k_norm.cols, s.kv_heads * hd);
    EXPECT_EQ(l.attn_k_norm.f32(), whole.attn_k_norm.f32() + s.kv_head_begin * hd);
  }
}

TEST(ShardWeightsTest, AMatrixCutOffItsBlocksIsRefused) {
  WeightView w{.name = "blk.0.ffn_down.weight", .dtype = DType::kQ4_K, .rows = 2, .cols = 512};
  std::vector<uint8_t> bytes(static_cast<size_t>(w.bytes()));
  w.data = bytes.data();
  ModelConfig c;
  c.head_dim = 16;
  DecoderWeights weights;
  LayerWeights l;
  l.ffn_down = w;
  l.attn_output = WeightView{.name = "o", .dtype = DType::kF32, .rows = 2, .cols = 32, .data = bytes.data()};
  weights.layers.push_back(l);
  ShardStorage copies;
  auto cut = ShardWeights(weights, c, {.q_heads = 2, .ffn_begin = 128, .ffn_columns = 128}, copies);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("blk.0.ffn_down.weight"), std::string::npos) << cut.status();
  EXPECT_NE(cut.status().message().find("256-value blocks"), std::string::npos) << cut.status();
}

}  // namespace
}  // namespace kvfleet::model
