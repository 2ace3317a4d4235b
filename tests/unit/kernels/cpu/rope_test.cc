#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvfleet::kernels {
namespace {

TEST(RopeTest, AdjacentPairsRotateByPositionTimesFrequency) {
  const int64_t d = 8;
  std::vector<float> x(d);
  for (int64_t i = 0; i < d; ++i) x[i] = static_cast<float>(i + 1);
  const std::vector<float> orig = x;
  const int32_t pos = 5;
  ApplyRope({.mode = RopeMode::kAdjacent, .head_dim = d, .rot_dim = d, .theta_base = 10000.0f}, x.data(), &pos, 1, 1);
  for (int64_t i = 0; i < d / 2; ++i) {
    const double a = pos * std::pow(10000.0, -2.0 * i / d);
    EXPECT_NEAR(x[2 * i], orig[2 * i] * std::cos(a) - orig[2 * i + 1] * std::sin(a), 1e-5);
    EXPECT_NEAR(x[2 * i + 1], orig[2 * i] * std::sin(a) + orig[2 * i + 1] * std::cos(a), 1e-5);
  }
}

TEST(RopeTest, HalvesPairingAndPartialRotation) {
  const int64_t d = 8, rot = 4;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> orig = x;
  const int32_t pos = 3;
  ApplyRope({.mode = RopeMode::kHalves, .head_dim = d, .rot_dim = rot, .theta_base = 100.0f}, x.data(), &pos, 1, 1);
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double a = pos * std::pow(100.0, -2.0 * i / rot);
    EXPECT_NEAR(x[i], orig[i] * std::cos(a) - orig[i + rot / 2] * std::sin(a), 1e-5);
  }
  for (int64_t i = rot; i < d; ++i) EXPECT_EQ(x[i], orig[i]);  // beyond rot_dim: untouched
}

TEST(RopeTest, PositionZeroIsIdentityAndLinearScalingDividesPositions) {
  std::vector<float> x = {1, 2, 3, 4};
  const int32_t zero = 0;
  ApplyRope({.head_dim = 4, .rot_dim = 4}, x.data(), &zero, 1, 1);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
  std::vector<float> scaled = {1, 2, 3, 4}, plain = {1, 2, 3, 4};
  const int32_t p8 = 8, p2 = 2;
  ApplyRope({.head_dim = 4, .rot_dim = 4, .position_scale = 0.25f}, scaled.data(), &p8, 1, 1);
  ApplyRope({.head_dim = 4, .rot_dim = 4}, plain.data(), &p2, 1, 1);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(scaled[i], plain[i], 1e-6);
}

}  // namespace
}  // namespace kvfleet::kernels
