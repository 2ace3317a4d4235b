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

}  // namespace
}  // namespace kvfleet
