#include "common/kv_sizing.h"

#include <gtest/gtest.h>

namespace kvfleet {
namespace {

TEST(KvSizingTest, SeventyBClassModelAtSixteenBitIs320KiBPerToken) {
  // Llama-2/3 70B: 80 layers, 8 KV heads of dimension 128, fp16.
  const KvShape shape{.num_layers = 80, .num_kv_heads = 8, .head_dim = 128};
  EXPECT_EQ(KvBytesPerToken(shape, 2), 327680);
  EXPECT_EQ(KvBytesPerToken(shape, 2), 320 * 1024);
}

TEST(KvSizingTest, SmolLM2At16BitIs23040BytesPerToken) {
  const KvShape shape{.num_layers = 30, .num_kv_heads = 3, .head_dim = 64};
  EXPECT_EQ(KvBytesPerToken(shape, 2), 23040);
}

TEST(KvSizingTest, TokensThatFitRoundDown) {
  const KvShape shape{.num_layers = 30, .num_kv_heads = 3, .head_dim = 64};
  EXPECT_EQ(KvTokensThatFit(shape, 2, 23040 * 10 + 23039), 10);
  EXPECT_EQ(KvTokensThatFit(KvShape{}, 2, 1000), 0);
}

TEST(KvSizingTest, PlanTurnsABudgetIntoWholeBlocks) {
  const KvShape smol{.num_layers = 30, .num_kv_heads = 3, .head_dim = 64};
  // 1 GiB at 16-bit, blocks of 16: 1073741824 / (23040 × 16) = 2912 blocks.
  const KvCachePlan plan = PlanKvCache(KvBytesPerToken(smol, 2), 16, int64_t{1} << 30, 8192);
  EXPECT_EQ(plan.bytes_per_token, 23040);
  EXPECT_EQ(plan.num_blocks, 2912);
  EXPECT_EQ(plan.tokens, 2912 * 16);
  EXPECT_EQ(plan.full_context_sequences, 5);  // 512 blocks per 8192-token sequence
}

TEST(KvSizingTest, ABudgetBelowOneBlockHoldsNone) {
  EXPECT_EQ(PlanKvCache(23040, 16, 23040 * 16 - 1, 8192).num_blocks, 0);
  EXPECT_EQ(PlanKvCache(23040, 16, 0, 8192).num_blocks, 0);
  EXPECT_EQ(BlocksForTokens(8000, 16), 500);
  EXPECT_EQ(BlocksForTokens(8001, 16), 501);
}

}  // namespace
}  // namespace kvfleet
