#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvfleet::kernels {
namespace {

// Angles for the given positions, then the rotation, as an executor does.
void Rotate(const RopeParams& p, float* x, const int32_t* positions, int64_t tokens, int64_t heads) {
  std::vector<float> cos(tokens * p.rot_dim / 2), sin(tokens * p.rot_dim / 2);
  RopeCosSin(p, positions, tokens, cos.data(), sin.data());
  ApplyRope(p, cos.data(), sin.data(), x, tokens, heads);
}

TEST(RopeTest, AdjacentPairsRotateByPositionTimesFrequency) {
  const int64_t d = 8;
  std::vector<float> x(d);
  for (int64_t i = 0; i < d; ++i) x[i] = static_cast<float>(i + 1);
  const std::vector<float> orig = x;
  const int32_t pos = 5;
  Rotate({.mode = RopeMode::kAdjacent, .head_dim = d, .rot_dim = d, .theta_base = 10000.0f}, x.data(), &pos, 1, 1);
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
  Rotate({.mode = RopeMode::kHalves, .head_dim = d, .rot_dim = rot, .theta_base = 100.0f}, x.data(), &pos, 1, 1);
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double a = pos * std::pow(100.0, -2.0 * i / rot);
    EXPECT_NEAR(x[i], orig[i] * std::cos(a) - orig[i + rot / 2] * std::sin(a), 1e-5);
  }
  for (int64_t i = rot; i < d; ++i) EXPECT_EQ(x[i], orig[i]);  // beyond rot_dim: untouched
}

TEST(RopeTest, PositionZeroIsIdentityAndLinearScalingDividesPositions) {
  std::vector<float> x = {1, 2, 3, 4};
  const int32_t zero = 0;
  Rotate({.head_dim = 4, .rot_dim = 4}, x.data(), &zero, 1, 1);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
  std::vector<float> scaled = {1, 2, 3, 4}, plain = {1, 2, 3, 4};
  const int32_t p8 = 8, p2 = 2;
  Rotate({.head_dim = 4, .rot_dim = 4, .position_scale = 0.25f}, scaled.data(), &p8, 1, 1);
  Rotate({.head_dim = 4, .rot_dim = 4}, plain.data(), &p2, 1, 1);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(scaled[i], plain[i], 1e-6);
}

TEST(RopeTest, EachTokenRotatesByItsOwnAnglesWhateverTheBatch) {
  const RopeParams p{.head_dim = 8, .rot_dim = 8, .theta_base = 500.0f};
  const std::vector<int32_t> positions = {7, 0, 300, 7};
  std::vector<float> batch(positions.size() * 2 * 8);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = std::sin(static_cast<float>(i));
  std::vector<float> alone = batch;
  Rotate(p, batch.data(), positions.data(), 4, 2);
  for (int64_t t = 0; t < 4; ++t) Rotate(p, alone.data() + t * 16, &positions[t], 1, 2);
  EXPECT_EQ(batch, alone);
}

}  // namespace
}  // namespace kvfleet::kernels
