// The flat batch: what the builder lays out for a mix of chunks, that
// clearing keeps nothing from the previous step, and what Validate refuses.
#include "engine/executor/forward_batch.h"

#include <gtest/gtest.h>

#include "kernels/common/paged_kv.h"

namespace kvfleet::engine {
namespace {

std::vector<BlockId> Blocks(std::initializer_list<int32_t> ids) {
  std::vector<BlockId> out;
  for (int32_t id : ids) out.emplace_back(id);
  return out;
}

// Page groups (sliding-window layers): a request's table interleaves its
// groups; the batch lays each group's tables and slots out on its own, and
// a freed window page (-1) names the null page.
TEST(ForwardBatchBuilderTest, PageGroupsGetTheirOwnTablesAndSlotsAndFreedPagesTheNullPage) {
  ForwardBatchBuilder builder(/*block_size=*/4, /*kv_groups=*/2, /*null_page=*/99);
  // Blocks 0..2 of group 0 are pages 10, 11, 12; group 1's block 0 was freed, 1 and 2 are 21, 22.
  builder.AddChunk(std::vector<model::TokenId>{5, 6}, 8, Blocks({10, -1, 11, 21, 12, 22}), LogitsWanted::kLast);
  builder.AddChunk(std::vector<model::TokenId>{7}, 1, Blocks({30, 40}), LogitsWanted::kLast);
  const ForwardBatch& b = builder.Finish();
  EXPECT_EQ(b.num_kv_groups, 2);
  ASSERT_EQ(b.max_blocks_per_chunk, 3);
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{10, 11, 12, /**/ 30, -1, -1,     // group 0
                                                 99, 21, 22, /**/ 40, -1, -1}));  // group 1
  EXPECT_EQ(b.BlockTableRow(0, 1)[0], 99);
  // Positions 8 and 9 are block 2, slots 0 and 1, in each group; position 1 block 0 slot 1.
  EXPECT_EQ(b.kv_slots, (std::vector<int64_t>{12 * 4 + 0, 12 * 4 + 1, 30 * 4 + 1,     // group 0
                                              22 * 4 + 0, 22 * 4 + 1, 40 * 4 + 1}));  // group 1
  EXPECT_TRUE(b.Validate(300, 1024, 100, 2, 2).ok());
  const absl::Status one_group = b.Validate(300, 1024, 100, 2, 1);
  EXPECT_NE(one_group.message().find("2 page groups; the cache has 1"), std::string::npos) << one_group;
}

// A tree verify chunk: node i stored at start + i, positioned by its depth,
// with a mask of its path; Validate refuses masks that are not paths.
TEST(ForwardBatchBuilderTest, TreeChunksStoreNodesInOrderAndPositionThemByDepth) {
  ForwardBatchBuilder builder(/*block_size=*/4);
  builder.AddChunk(std::vector<model::TokenId>{9}, 6, Blocks({1, 2}), LogitsWanted::kLast);
  // Root 40 at 5; children 41 and 42; 43 under 42; 44 under 41.
  builder.AddChunk(std::vector<model::TokenId>{40, 41, 42, 43, 44}, 5, Blocks({3, 4, 5}), LogitsWanted::kAll,
                   std::vector<int32_t>{-1, 0, 0, 2, 1});
  const ForwardBatch& b = builder.Finish();
  EXPECT_EQ(b.positions, (std::vector<int32_t>{6, 5, 6, 6, 7, 7}));
  EXPECT_EQ(b.tree_masks, (std::vector<uint64_t>{0, 0b1, 0b11, 0b101, 0b1101, 0b10011}));
  // Stored one after another: positions 5..9 of blocks 4 and 5.
  EXPECT_EQ(b.kv_slots, (std::vector<int64_t>{2 * 4 + 2, 4 * 4 + 1, 4 * 4 + 2, 4 * 4 + 3, 5 * 4 + 0, 5 * 4 + 1}));
  EXPECT_EQ(b.chunk_end_position(1), 10);
  EXPECT_TRUE(b.Validate(64, 64, 10, 2).ok());
  // Node 4's logical keys: 0..5 in place, then its path's node 1 at 6.
  EXPECT_EQ(kernels::TreeKeyIndex(5, 7, 0b10011), 5);
  EXPECT_EQ(kernels::TreeKeyIndex(6, 7, 0b10011), 6);
  EXPECT_EQ(kernels::TreeKeyIndex(7, 7, 0b10011), 9);
  EXPECT_EQ(kernels::TreeKeyIndex(7, 7, 0b1101), 8);
  EXPECT_EQ(kernels::TreeKeyIndex(6, 7, 0b1101), 7);
  EXPECT_EQ(kernels::TreeKeyEnd(7, 0b10011), 10);

  ForwardBatch broken = b;
  broken.tree_masks[4] = 0b1111;  // node 3 seeing node 1 beside its path
  EXPECT_NE(broken.Validate(64, 64, 10, 2).message().find("not a path"), std::string::npos);
  broken = b;
  broken.positions[4] = 8;  // deeper than its path
  EXPECT_NE(broken.Validate(64, 64, 10, 2).message().find("not a path"), std::string::npos)
      << broken.Validate(64, 64, 10, 2);
  broken = b;
  broken.tree_masks[1] = 0;  // a tree without its root
  EXPECT_FALSE(broken.Validate(64, 64, 10, 2).ok());
  // A parent after its child cannot be built.
  builder.Clear();
  builder.AddChunk(std::vector<model::TokenId>{40, 41, 42}, 0, Blocks({3}), LogitsWanted::kAll,
                   std::vector<int32_t>{-1, 2, 0});
  EXPECT_FALSE(builder.Finish().Validate(64, 64, 10, 2).ok());
}

TEST(ForwardBatchBuilderTest, LaysOutTokensSlotsTablesAndLogitsRows) {
  ForwardBatchBuilder builder(/*block_size=*/4);
  const std::vector<model::TokenId> prefill = {10, 11, 12, 13, 14, 15};  // positions 3..8
  const std::vector<model::TokenId> decode = {20};                       // position 4
  const std::vector<model::TokenId> verify = {30, 31, 32};               // positions 0..2
  // A table may be longer than the chunk needs (blocks for a draft): only the needed entries are kept.
  builder.AddChunk(prefill, 3, Blocks({7, 2, 9, 5}), LogitsWanted::kNone);
  builder.AddChunk(decode, 4, Blocks({1, 6}), LogitsWanted::kLast);
  builder.AddChunk(verify, 0, Blocks({3}), LogitsWanted::kAll);
  const ForwardBatch& b = builder.Finish();

  EXPECT_EQ(b.num_tokens(), 10);
  EXPECT_EQ(b.num_chunks(), 3);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 20, 30, 31, 32}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 4, 0, 1, 2}));
  EXPECT_EQ(b.token_chunk, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 2, 2, 2}));
  // Position 3 is block 0 (id 7) slot 3; position 8 is block 2 (id 9) slot 0.
  EXPECT_EQ(b.kv_slots, (std::vector<int64_t>{7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 2 * 4 + 2, 2 * 4 + 3, 9 * 4 + 0,
                                              6 * 4 + 0, 3 * 4 + 0, 3 * 4 + 1, 3 * 4 + 2}));
  EXPECT_EQ(b.chunk_starts, (std::vector<int32_t>{0, 6, 7, 10}));
  ASSERT_EQ(b.max_blocks_per_chunk, 3);
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{7, 2, 9, /**/ 1, 6, -1, /**/ 3, -1, -1}));
  EXPECT_EQ(b.logits_tokens, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(b.first_logits_row(1), 0);
  EXPECT_EQ(b.first_logits_row(2), 1);
  EXPECT_EQ(b.chunk_logits_starts, (std::vector<int32_t>{0, 0, 1, 4}));
  EXPECT_EQ(b.chunk_end_position(0), 9);
  EXPECT_TRUE(b.Validate(/*vocab_size=*/64, /*context_length=*/64, /*num_blocks=*/10, /*model_layers=*/2).ok());

  builder.Clear(/*num_layers=*/1);
  builder.AddChunk(decode, 0, Blocks({4}), LogitsWanted::kLast);
  const ForwardBatch& next = builder.Finish();
  EXPECT_EQ(next.num_layers, 1);
  EXPECT_EQ(next.token_ids, (std::vector<int32_t>{20}));
  EXPECT_EQ(next.block_table, (std::vector<int32_t>{4}));
  EXPECT_EQ(next.logits_tokens, (std::vector<int32_t>{0}));
}

TEST(ForwardBatchTest, ValidateNamesTheProblem) {
  const std::vector<model::TokenId> tokens = {1, 2, 3, 4, 5};
  const auto error = [&](int32_t start, const std::vector<BlockId>& table, int32_t layers = 0) {
    ForwardBatchBuilder builder(4);
    builder.Clear(layers);
    builder.AddChunk(tokens, start, table, LogitsWanted::kLast);
    return std::string(builder.Finish().Validate(/*vocab_size=*/5, 16, /*num_blocks=*/8, 2).message());
  };
  EXPECT_NE(error(0, Blocks({0, 1})).find("token id 5 is outside the vocabulary [0, 5)"), std::string::npos);
  const std::vector<model::TokenId> ok = {1, 2, 3, 4, 0};
  ForwardBatchBuilder builder(4);
  builder.AddChunk(ok, 0, Blocks({0}), LogitsWanted::kLast);
  EXPECT_NE(builder.Finish().Validate(5, 16, 8, 2).message().find("needs 2 blocks but its block table has 1"),
            std::string::npos);
  builder.Clear();
  builder.AddChunk(ok, 0, Blocks({0, 8}), LogitsWanted::kLast);
  EXPECT_NE(builder.Finish().Validate(5, 16, 8, 2).message().find("block 8 outside the cache of 8"),
            std::string::npos);
  builder.Clear();
  builder.AddChunk(ok, 14, Blocks({0, 1, 2, 3, 4, 5}), LogitsWanted::kLast);
  EXPECT_NE(builder.Finish().Validate(5, 16, 8, 2).message().find("past the model's context length 16"),
            std::string::npos);
  builder.Clear(3);
  builder.AddChunk(ok, 0, Blocks({0, 1}), LogitsWanted::kLast);
  EXPECT_NE(builder.Finish().Validate(5, 16, 8, 2).message().find("num_layers 3"), std::string::npos);
}

TEST(ForwardBatchTest, LimitsAreCheckedAgainstTheExecutors) {
  ForwardBatchBuilder builder(4);
  const std::vector<model::TokenId> tokens = {1, 2, 3};
  builder.AddChunk(tokens, 0, Blocks({0}), LogitsWanted::kAll);
  const ForwardBatch& b = builder.Finish();
  EXPECT_TRUE(CheckBatchLimits(b, {.max_batch_tokens = 3, .max_batch_chunks = 1}).ok());
  EXPECT_FALSE(CheckBatchLimits(b, {.max_batch_tokens = 2, .max_batch_chunks = 1}).ok());
  EXPECT_FALSE(CheckBatchLimits(b, {.max_batch_tokens = 8, .max_batch_chunks = 1, .max_logits_rows = 2}).ok());
}

TEST(ExecutorOptionsTest, DevicesParseAndBadOnesAreNamed) {
  EXPECT_EQ(*ParseDevice("cpu"), Device{});
  EXPECT_EQ(*ParseDevice("cuda"), (Device{.kind = DeviceKind::kCuda, .index = 0}));
  EXPECT_EQ(ParseDevice("cuda:3")->ToString(), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "auto"}) {
    const auto d = ParseDevice(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseDevice("tpu").status().message().find("cuda:N"), std::string::npos);
  EXPECT_FALSE((ExecutorLimits{.max_batch_tokens = 4, .max_batch_chunks = 8}).Validate().ok());
}

TEST(ExecutorOptionsTest, KvCacheDtypesParseAndBadOnesAreNamed) {
  EXPECT_EQ(*ParseKvCacheDtype("f16"), kernels::KvCacheDtype::kF16);
  EXPECT_FALSE(ParseKvCacheDtype("auto").ok());  // a worker's "auto" is a setting (engine/calibration)
  EXPECT_EQ(*ParseKvCacheDtype("int8"), kernels::KvCacheDtype::kInt8);
  EXPECT_EQ(*ParseKvCacheDtype("fp8"), kernels::KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3"), kernels::KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvCacheDtype("int8_rotated_scaled"), kernels::KvCacheDtype::kInt8RotatedScaled);
  for (const char* bad : {"int4", "fp8_e5m2", "", "F16"}) {
    const auto d = ParseKvCacheDtype(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("f16, int8, int8_rotated, int8_rotated_scaled or fp8_e4m3"), std::string::npos)
        << d.status();
  }
}

TEST(ExecutorOptionsTest, CpuActivationsParseAndBadOnesAreNamed) {
  EXPECT_EQ(*ParseCpuActivations("f32"), CpuActivations::kF32);
  EXPECT_EQ(*ParseCpuActivations("q8"), CpuActivations::kQ8);
  const auto bad = ParseCpuActivations("int4");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("f32 or q8"), std::string::npos);
  // q8 is the CPU backend's: asked for on a GPU, it is refused, not ignored.
  const absl::Status on_gpu =
      ExecutorOptions{.device = {.kind = DeviceKind::kCuda}, .cpu_activations = CpuActivations::kQ8}.Validate();
  EXPECT_EQ(on_gpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(on_gpu.message().find("cuda:0"), std::string::npos) << on_gpu;
}

}  // namespace
}  // namespace kvfleet::engine
