#include "engine/executor/lora_slots.h"

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_lora.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class LoraSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 3}, dir_.Path("m.gguf")).ok());
    model_ = *model::Model::Load(dir_.Path("m.gguf"));
    a_ = std::make_shared<const model::LoraAdapter>(tools::RandomLoraAdapter(*model_, {.name = "a", .rank = 4}));
    b_ = std::make_shared<const model::LoraAdapter>(tools::RandomLoraAdapter(
        *model_, {.name = "b", .rank = 2, .seed = 2, .targets = {model::Projection::kFfnDown}}));
  }

  testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
  std::shared_ptr<const model::LoraAdapter> a_, b_;
};

TEST_F(LoraSlotsTest, ConsecutiveChunksOfOneAdapterAreOneSegmentAndBaseRowsNone) {
  LoraSlots slots(3, model_->config().num_layers, 8);
  slots.Set(0, ResidentLora::InPlace(a_));
  slots.Set(2, ResidentLora::InPlace(b_));
  ForwardBatchBuilder builder(4);
  const std::vector<BlockId> table = {BlockId(0), BlockId(1), BlockId(2)};
  const std::vector<model::TokenId> three = {1, 2, 3}, two = {4, 5};
  builder.AddChunk(two, 0, table, LogitsWanted::kLast);           // rows 0-1: base
  builder.AddChunk(three, 0, table, LogitsWanted::kLast, {}, 0);  // rows 2-4: a
  builder.AddChunk(two, 0, table, LogitsWanted::kLast, {}, 0);    // rows 5-6: a, the same run
  builder.AddChunk(three, 0, table, LogitsWanted::kLast, {}, 2);  // rows 7-9: b
  const ForwardBatch& batch = builder.Finish();
  EXPECT_EQ(batch.chunk_lora, (std::vector<int32_t>{-1, 0, 0, 2}));
  absl::StatusOr<int32_t> count = slots.BuildSegments(batch);
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_EQ(*count, 2);
  EXPECT_EQ(slots.segment_rows(), 8);
  const kernels::LoraSegment* q = slots.Site(0, model::Projection::kAttnQ, 2);
  EXPECT_EQ(q[0].first_row, 2);
  EXPECT_EQ(q[0].rows, 5);
  EXPECT_EQ(q[0].rank, 4);
  EXPECT_FLOAT_EQ(q[0].scale, static_cast<float>(a_->scale));
  EXPECT_EQ(q[0].a, a_->Pair(0, model::Projection::kAttnQ)->a.data());
  EXPECT_EQ(q[1].first_row, 7);
  EXPECT_EQ(q[1].a, nullptr) << "b leaves q alone";
  const int32_t last = model_->config().num_layers - 1;
  EXPECT_EQ(slots.Site(last, model::Projection::kFfnDown, 2)[1].b,
            b_->Pair(last, model::Projection::kFfnDown)->b.data());

  // A batch of the base model alone has no table at all.
  ForwardBatchBuilder base(4);
  base.AddChunk(three, 0, table, LogitsWanted::kLast);
  EXPECT_TRUE(base.Finish().chunk_lora.empty());
  EXPECT_EQ(*slots.BuildSegments(base.Finish()), 0);
}

TEST_F(LoraSlotsTest, RefusesEmptySlotsAndAdaptersThatDoNotFit) {
  LoraSlots slots(2, model_->config().num_layers, 8);
  ForwardBatchBuilder builder(4);
  const std::vector<BlockId> table = {BlockId(0)};
  const std::vector<model::TokenId> one = {1};
  builder.AddChunk(one, 0, table, LogitsWanted::kLast, {}, 1);
  const absl::StatusOr<int32_t> empty = slots.BuildSegments(builder.Finish());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("holds no adapter"), std::string_view::npos) << empty.status();
  EXPECT_EQ(slots.CheckSlot(2).code(), absl::StatusCode::kInvalidArgument);

  const absl::Status rank = LoraSlots::CheckFits(*a_, model_->weights(), /*max_rank=*/2);
  EXPECT_NE(rank.message().find("--max-lora-rank 2"), std::string_view::npos) << rank;
  model::LoraAdapter narrow = *a_;
  narrow.layers[1][0]->out -= 1;
  const absl::Status shape = LoraSlots::CheckFits(narrow, model_->weights(), 8);
  EXPECT_NE(shape.message().find("layer 1's q_proj"), std::string_view::npos) << shape;
  EXPECT_TRUE(LoraSlots::CheckFits(*a_, model_->weights(), 4).ok());
}

}  // namespace
}  // namespace kvfleet::engine
