// The 8-bit KV element codecs against definitions written out by brute
// force: every FP8 E4M3 code round-trips, and encoding picks the nearest
// code (ties to the even one) with saturation; int8 rounds half to even and
// clamps.
#include "kernels/common/kv_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kvfleet::kernels {
namespace {

// E4M3's finite values from the OCP definition, by code.
double Fp8Definition(int code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xF, mant = code & 7;
  const double v = exp == 0 ? mant / 8.0 * std::ldexp(1.0, -6) : (1 + mant / 8.0) * std::ldexp(1.0, exp - 7);
  return sign ? -v : v;
}

TEST(KvFormatTest, EveryFp8CodeDecodesAsDefinedAndRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(static_cast<uint8_t>(code))));
      continue;
    }
    EXPECT_EQ(Fp8E4M3ToFloat(static_cast<uint8_t>(code)), Fp8Definition(code)) << code;
    const uint8_t back = FloatToFp8E4M3(Fp8E4M3ToFloat(static_cast<uint8_t>(code)));
    EXPECT_EQ(back, code == 0x80 ? 0 : code) << code;  // -0 comes back as +0
  }
  EXPECT_EQ(Fp8E4M3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
}

TEST(KvFormatTest, Fp8EncodingIsTheNearestCodeTiesToEvenAndSaturates) {
  std::vector<double> finite;  // the non-negative finite values, ascending with their codes
  for (int code = 0; code <= 0x7E; ++code) finite.push_back(Fp8Definition(code));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log2(-12.0f, 10.0f);
  std::vector<float> xs = {0.0f, 448.0f, 464.0f, 500.0f, 1e9f, INFINITY, 0.0009765625f, 0.0029296875f};
  for (int i = 0; i < 20000; ++i) xs.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(log2(rng)));
  for (int code = 1; code < 0x7E; ++code) {  // exact midpoints between neighbours: ties go to the even code
    xs.push_back(static_cast<float>((finite[code] + finite[code + 1]) / 2));
  }
  for (float x : xs) {
    const double a = std::fabs(static_cast<double>(x));
    int best = 0x7E;
    if (a < 448.0) {
      best = 0;
      for (int code = 1; code <= 0x7E; ++code) {
        const double d = std::fabs(finite[code] - a), bd = std::fabs(finite[best] - a);
        if (d < bd || (d == bd && code % 2 == 0)) best = code;
      }
    }
    const int want = x < 0 ? best | 0x80 : best;  // a negative that rounds to zero is -0
    ASSERT_EQ(FloatToFp8E4M3(x), want) << x;
  }
  EXPECT_EQ(FloatToFp8E4M3(NAN) & 0x7F, 0x7F);
}

TEST(KvFormatTest, Int8RoundsHalfToEvenAndClamps) {
  EXPECT_EQ(QuantizeInt8(2.5f, 1.0f), 2);
  EXPECT_EQ(QuantizeInt8(3.5f, 1.0f), 4);
  EXPECT_EQ(QuantizeInt8(-2.5f, 1.0f), -2);
  EXPECT_EQ(QuantizeInt8(126.6f, 1.0f), 127);
  EXPECT_EQ(QuantizeInt8(1000.0f, 1.0f), 127);
  EXPECT_EQ(QuantizeInt8(-1000.0f, 1.0f), -127);  // symmetric: -128 is never used
  EXPECT_EQ(QuantizeInt8(5.0f, 0.0f), 0);         // an all-zero row has scale 0
  EXPECT_EQ(QuantizeInt8(0.3f, 0.1f), 3);
}

TEST(KvFormatTest, EightBitFormatsTakeAboutHalfTheBytes) {
  for (int64_t d : {64, 128}) {
    const double int8 =
        static_cast<double>(d * KvElementBytes(KvCacheDtype::kInt8) + KvRowScaleBytes(KvCacheDtype::kInt8));
    const double f16 = static_cast<double>(d * KvElementBytes(KvCacheDtype::kF16));
    EXPECT_LE(int8 / f16, 0.53) << d;
    EXPECT_EQ(d * KvElementBytes(KvCacheDtype::kFp8E4M3), d);
  }
}

// The rotation of kInt8Rotated's keys against the Walsh–Hadamard matrix
// written out (H[i][j] = (-1)^popcount(i & j)), on integers, where every sum
// is exact: per block, twice gives n·x, and (Hq)·(Hk) = n·(q·k).
TEST(KvFormatTest, HadamardBlocksIsTheWalshHadamardTransformPerBlock) {
  EXPECT_EQ(KvRotationBlock(64), 64);
  EXPECT_EQ(KvRotationBlock(128), 128);
  EXPECT_EQ(KvRotationBlock(96), 32);
  EXPECT_EQ(KvRotationBlock(80), 16);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> value(-50, 50);
  for (int64_t d : {16, 64, 96, 256}) {
    const int64_t n = KvRotationBlock(d);
    std::vector<double> x(d), q(d);
    for (auto& e : x) e = value(rng);
    for (auto& e : q) e = value(rng);
    std::vector<double> hx = x, hq = q;
    HadamardBlocks(hx.data(), d, n);
    HadamardBlocks(hq.data(), d, n);
    for (int64_t i = 0; i < d; ++i) {
      const int64_t base = i / n * n;
      double want = 0;
      for (int64_t j = 0; j < n; ++j) want += (__builtin_popcountll((i - base) & j) % 2 ? -1 : 1) * x[base + j];
      ASSERT_EQ(hx[i], want) << "d " << d << " element " << i;
    }
    double dot = 0, rotated_dot = 0;
    for (int64_t i = 0; i < d; ++i) {
      dot += x[i] * q[i];
      rotated_dot += hx[i] * hq[i];
    }
    EXPECT_EQ(rotated_dot, static_cast<double>(n) * dot) << d;
    std::vector<double> twice = hx;
    HadamardBlocks(twice.data(), d, n);
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(twice[i], static_cast<double>(n) * x[i]) << i;
  }
  EXPECT_EQ(KvCacheDtypeName(KvCacheDtype::kInt8Rotated), "int8_rotated");
  EXPECT_EQ(KvRowScaleBytes(KvCacheDtype::kInt8Rotated), 2);
  EXPECT_EQ(KvElementBytes(KvCacheDtype::kInt8Rotated), 1);
  EXPECT_FALSE(KvScalesKeyChannels(KvCacheDtype::kInt8Rotated));
}

// Scaled keys are rotated int8 rows whose layer has per-channel scales.
TEST(KvFormatTest, ScaledKeysAreRotatedInt8RowsWithChannelScales) {
  const KvCacheDtype d = KvCacheDtype::kInt8RotatedScaled;
  EXPECT_EQ(KvCacheDtypeName(d), "int8_rotated_scaled");
  EXPECT_EQ(KvRowScaleBytes(d), 2);
  EXPECT_EQ(KvElementBytes(d), 1);
  EXPECT_TRUE(KvRotatesKeys(d));
  EXPECT_TRUE(KvScalesKeyChannels(d));
  for (KvCacheDtype other : {KvCacheDtype::kF16, KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    EXPECT_FALSE(KvScalesKeyChannels(other));
  }
}

}  // namespace
}  // namespace kvfleet::kernels
