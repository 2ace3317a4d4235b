#include "kernels/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvfleet::kernels {
namespace {

TEST(ElementwiseTest, RmsNormScalesToUnitRootMeanSquareTimesWeight) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8};
  std::vector<float> w(8, 2.0f), y(16);
  RmsNorm(x.data(), w.data(), y.data(), 2, 8, 0.0f);
  const double rms = std::sqrt((1 + 4 + 9 + 16 + 25 + 36 + 49 + 64) / 8.0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(y[i], 2.0 * x[i] / rms, 1e-5);
    EXPECT_NEAR(y[8 + i], 2.0 * x[8 + i] / rms, 1e-5);
  }
}

TEST(ElementwiseTest, SwiGluIsSiluOfGateTimesUp) {
  std::vector<float> g = {-2, 0, 1, 3}, u = {1, 2, 3, 4}, out(4);
  SwiGlu(g.data(), u.data(), out.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
}

}  // namespace
}  // namespace kvfleet::kernels
