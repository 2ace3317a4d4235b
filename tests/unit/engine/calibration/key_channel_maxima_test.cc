// The key maxima read back from a float16 page, and the rule that makes
// them int8_rotated_scaled's powers of two.
#include "engine/calibration/key_channel_maxima.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/float16.h"

namespace kvfleet::engine {
namespace {

// A float16 page of 2 layers × 1 KV head × 4 channels, block size 2: every
// K row of layer l, slot t holds key(l, t, channel); V rows hold a decoy.
std::vector<uint8_t> Page(const kernels::KvCacheLayout& one, float (*key)(int64_t, int64_t, int64_t)) {
  const int64_t piece = one.BytesPerLayer();
  std::vector<uint8_t> page(static_cast<size_t>(2 * 2 * piece), 0);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t t = 0; t < one.block_size; ++t) {
      for (int64_t c = 0; c < one.head_dim; ++c) {
        const uint16_t k = FloatToHalf(key(l, t, c)), v = FloatToHalf(1000.0f);
        std::memcpy(page.data() + 2 * l * piece + one.RowOffset(0, 0, t) + 2 * c, &k, 2);
        std::memcpy(page.data() + (2 * l + 1) * piece + one.RowOffset(0, 0, t) + 2 * c, &v, 2);
      }
    }
  }
  return page;
}

TEST(KeyChannelMaximaTest, OutlierChannelsGetHalfTheirLogRatioAndTheRestOne) {
  const kernels::KvCacheLayout one{.num_blocks = 1, .num_kv_heads = 1, .block_size = 2, .head_dim = 4};
  KeyChannelMaxima maxima(2, 1, 4);
  // Layer 0: maxima 1, 1, 64, 2, so the median (the upper one of four) is
  // 2: channel 2 is 32x it, half of log2 32 is 2.5, rounded away from zero
  // to 3; channel 3 is the median itself. The second slot's huge values are
  // past `tokens` and must not count. Layer 1: all alike, nothing scaled.
  maxima.AddBlock(Page(one,
                       [](int64_t l, int64_t t, int64_t c) -> float {
                         if (t == 1) return 1e4f;
                         if (l == 1) return -1.0f;
                         return c == 2 ? -64.0f : c == 3 ? 2.0f : 1.0f;
                       }),
                  one, 1);
  const KeyChannelScales s = maxima.Scales();
  EXPECT_EQ(s.num_layers, 2);
  EXPECT_EQ(s.exponents, (std::vector<uint8_t>{0, 0, 3, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(s.CheckShape(2, 1, 4).ok());
  EXPECT_FALSE(s.CheckShape(3, 1, 4).ok());
}

TEST(KeyChannelMaximaTest, ExponentsStopAtTheLargestTheFormatTakes) {
  const kernels::KvCacheLayout one{.num_blocks = 1, .num_kv_heads = 1, .block_size = 2, .head_dim = 4};
  KeyChannelMaxima maxima(2, 1, 4);
  maxima.AddBlock(Page(one, [](int64_t, int64_t, int64_t c) -> float { return c == 0 ? 60000.0f : 1e-7f; }), one, 2);
  const KeyChannelScales s = maxima.Scales();
  EXPECT_EQ(s.exponents[0], kMaxKeyScaleExponent);
  EXPECT_EQ(s.Multipliers()[0], 32768.0f);
  EXPECT_EQ(s.Digest().size(), 8u);
}

}  // namespace
}  // namespace kvfleet::engine
