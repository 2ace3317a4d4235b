#include "engine/sampler/argmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace kvfleet::engine {
namespace {

model::TokenId MaxElement(const std::vector<float>& v) {
  return static_cast<model::TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(ArgmaxTest, AgreesWithMaxElementOnRandomRowsOfEveryLength) {
  std::mt19937 rng(7);
  for (size_t n = 1; n < 70; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> v(n);
      // Few distinct values, so ties are common.
      for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 5)) - 2.0f;
      ASSERT_EQ(Argmax(v), MaxElement(v)) << "n=" << n << " trial " << trial;
    }
  }
}

TEST(ArgmaxTest, TiesGoToTheLowestIndexAcrossLanes) {
  std::vector<float> v(151936, -3.0f);
  v[100003] = 9.0f;
  v[17] = 9.0f;  // another lane, earlier
  v[150000] = 9.0f;
  EXPECT_EQ(Argmax(v), 17);
}

TEST(ArgmaxTest, NegativeAndPositiveZeroAreOneValue) {
  EXPECT_EQ(Argmax(std::vector<float>{-1.0f, -0.0f, 0.0f}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{-0.0f, 0.0f}), 0);
}

TEST(ArgmaxTest, ANaNIsChosenOnlyWhenItComesFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(40, 0.0f);
  v[3] = nan;
  v[20] = 1.0f;
  v[21] = nan;
  EXPECT_EQ(Argmax(v), 20);
  EXPECT_EQ(Argmax(v), MaxElement(v));
  v[0] = nan;
  EXPECT_EQ(Argmax(v), 0);
  EXPECT_EQ(Argmax(v), MaxElement(v));
}

TEST(ArgmaxTest, InfinitiesCompareAsNumbers) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(33, -inf);
  EXPECT_EQ(Argmax(v), 0);
  v[32] = inf;
  EXPECT_EQ(Argmax(v), 32);
}

}  // namespace
}  // namespace kvfleet::engine
