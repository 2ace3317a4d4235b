#include "kernels/cpu/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/float16.h"
#include "kernels/cpu/quant_blocks.h"
#include "tests/testing/random_data.h"

namespace kvfleet::kernels {
namespace {

using ::kvfleet::testing::RandomFloats;

// Worst-case rounding error of one element, relative to the block's range.
float Tolerance(DType t, float block_range) {
  switch (t) {
    case DType::kF32:
      return 0.0f;
    case DType::kF16:
      return block_range * 1e-3f;
    case DType::kBF16:
      return block_range * 8e-3f;
    case DType::kQ8_0:
      return block_range / 127.0f;
    case DType::kQ4_0:
      return block_range / 8.0f;
    case DType::kQ4_1:
      return block_range / 15.0f;
  }
  return 0;
}

TEST(QuantizeTest, RoundTripErrorIsWithinTheFormatsResolution) {
  const int64_t n = 256;
  const std::vector<float> src = RandomFloats(n, 1, 2.0f);
  for (DType t : kAllDTypes) {
    std::vector<uint8_t> q(RowBytes(t, n));
    std::vector<float> back(n);
    QuantizeRow(t, src.data(), q.data(), n);
    DequantizeRow(t, q.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(back[i], src[i], Tolerance(t, 4.0f) + 1e-6f) << DTypeName(t) << " element " << i;
    }
  }
}

TEST(QuantizeTest, DequantizeMatchesTheFormatDefinition) {
  // Hand-built blocks, decoded by the formulas of the GGUF formats.
  BlockQ4_1 b1{};
  b1.d = FloatToHalf(0.5f);
  b1.m = FloatToHalf(-2.0f);
  for (int j = 0; j < 16; ++j) b1.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  DequantizeRow(DType::kQ4_1, &b1, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 2.0f);
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 2.0f);
  }
  BlockQ4_0 b0{};
  b0.d = FloatToHalf(0.25f);
  for (int j = 0; j < 16; ++j) b0.qs[j] = static_cast<uint8_t>(j | (j << 4));
  DequantizeRow(DType::kQ4_0, &b0, y, 32);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], (j - 8) * 0.25f);
  BlockQ8_0 b8{};
  b8.d = FloatToHalf(0.125f);
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(j - 16);
  DequantizeRow(DType::kQ8_0, &b8, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 0.125f);
}

TEST(QuantizeTest, HalfAndBfloatConversionsRoundToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 lies halfway between two bfloat16 values: ties go to even (1.0).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace kvfleet::kernels
