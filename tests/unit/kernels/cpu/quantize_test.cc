#include "kernels/cpu/quantize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/float16.h"
#include "kernels/cpu/formats/all_formats.h"
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
    case DType::kQ5_0:
      return block_range / 31.0f;
    case DType::kQ5_1:
      return block_range / 31.0f;
    case DType::kQ2_K:  // 3 steps of a 4-bit scale rounded up, less a 4-bit min
      return block_range / 4.0f;
    case DType::kQ3_K:  // −4..3 steps of a 6-bit signed scale
      return block_range / 5.0f;
    case DType::kQ4_K:  // 15 steps of a 6-bit scale, less a 6-bit min
      return block_range / 8.0f;
    case DType::kQ5_K:
      return block_range / 16.0f;
    case DType::kQ6_K:
      return block_range / 20.0f;
  }
  return 0;
}

// The gguf package's numpy dequantization of one block of a quantized type,
// restated as scalar loops in its float order: each scale product rounded
// to float before it multiplies q, a min subtracted after. Empty for a type
// with no definition here (a test fails for it).
std::vector<float> ScalarDequant(DType t, const uint8_t* p) {
  std::vector<float> y;
  if (t == DType::kQ8_0) {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
    for (int j = 0; j < 32; ++j) y.push_back(static_cast<float>(b.qs[j]) * HalfToFloat(b.d));
  } else if (t == DType::kQ4_0 || t == DType::kQ4_1) {
    const uint8_t* qs =
        t == DType::kQ4_0 ? reinterpret_cast<const BlockQ4_0*>(p)->qs : reinterpret_cast<const BlockQ4_1*>(p)->qs;
    const float d = HalfToFloat(reinterpret_cast<const uint16_t*>(p)[0]);
    for (int e = 0; e < 32; ++e) {
      const int q = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
      y.push_back(t == DType::kQ4_0 ? static_cast<float>(q - 8) * d
                                    : static_cast<float>(q) * d + HalfToFloat(reinterpret_cast<const uint16_t*>(p)[1]));
    }
  } else if (t == DType::kQ5_0) {
    const auto& b = *reinterpret_cast<const BlockQ5_0*>(p);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const float d = HalfToFloat(b.d);
    y.resize(32);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + 16] = d * static_cast<float>(hi - 16);
    }
  } else if (t == DType::kQ5_1) {
    const auto& b = *reinterpret_cast<const BlockQ5_1*>(p);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const float d = HalfToFloat(b.d), m = HalfToFloat(b.m);
    y.resize(32);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    }
  } else if (t == DType::kQ2_K) {
    const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
    for (int e = 0; e < 256; ++e) {
      const int q = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const float dl = HalfToFloat(b.d) * static_cast<float>(b.scales[e / 16] & 15);
      const float ml = HalfToFloat(b.dmin) * static_cast<float>(b.scales[e / 16] >> 4);
      y.push_back(dl * static_cast<float>(q) - ml);
    }
  } else if (t == DType::kQ3_K) {
    const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
    for (int e = 0; e < 256; ++e) {
      const int low = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
      const int g = e / 16;
      const int scale = (((b.scales[g % 8] >> (4 * (g / 8))) & 15) | (((b.scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
      y.push_back(HalfToFloat(b.d) * static_cast<float>(scale) * static_cast<float>(low - 4 * (1 - high)));
    }
  } else if (t == DType::kQ5_K) {
    const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      Q4KScaleMin(b.scales, j, &sc, &mn);
      const float d = HalfToFloat(b.d) * sc, m = HalfToFloat(b.dmin) * mn;
      for (int l = 0; l < 32; ++l) {
        const int q = ((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | (((b.qh[l] >> j) & 1) << 4);
        y.push_back(d * static_cast<float>(q) - m);
      }
    }
  } else if (t == DType::kQ4_K) {
    const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      Q4KScaleMin(b.scales, j, &sc, &mn);
      const float d = HalfToFloat(b.d) * sc, m = HalfToFloat(b.dmin) * mn;
      for (int l = 0; l < 32; ++l) y.push_back(d * static_cast<float>((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) - m);
    }
  } else if (t == DType::kQ6_K) {
    const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, r = e % 128;
      const int low = (b.ql[64 * half + r % 64] >> (4 * (r / 64))) & 15;
      const int high = (b.qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
      const float d = HalfToFloat(b.d) * static_cast<float>(b.scales[e / 16]);
      y.push_back(d * static_cast<float>((low | (high << 4)) - 32));
    }
  }
  return y;
}

// Where a block of each quantized type keeps its f16 scales (and mins).
std::vector<int> HalfFieldOffsets(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return {};
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
  }
  return {};
}

// Every quantized type of the table, from random bytes with finite scales,
// as real files have: every bit pattern of the quantized values, every
// scale and min.
TEST(QuantizeTest, EveryQuantizedTypeDequantizesAsItsDefinitionBitForBit) {
  std::mt19937 rng(11);
  for (DType t : kAllDTypes) {
    if (IsFloat(t)) continue;
    const int64_t blocks = 64, elems = Traits(t).block_elems, bytes = Traits(t).block_bytes;
    std::vector<uint8_t> q(blocks * bytes);
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    for (int64_t i = 0; i < blocks; ++i) {
      // Finite f16 scales in [2^-14, 2^4): sign, then an exponent below the top.
      for (int offset : HalfFieldOffsets(t)) {
        const uint16_t h = static_cast<uint16_t>((rng() & 0x83ff) | ((1 + rng() % 18) << 10));
        std::memcpy(q.data() + i * bytes + offset, &h, 2);
      }
    }
    ASSERT_EQ(ScalarDequant(t, q.data()).size(), static_cast<size_t>(elems))
        << DTypeName(t) << " has no definition here";
    std::vector<float> y(blocks * elems);
    DequantizeRow(t, q.data(), y.data(), blocks * elems);
    for (int64_t i = 0; i < blocks; ++i) {
      const std::vector<float> want = ScalarDequant(t, q.data() + i * bytes);
      for (int64_t e = 0; e < elems; ++e) {
        ASSERT_EQ(std::bit_cast<uint32_t>(y[i * elems + e]), std::bit_cast<uint32_t>(want[e]))
            << DTypeName(t) << " block " << i << " element " << e;
      }
    }
  }
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
