#include "tools/load/latency_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvfleet::load {
namespace {

TEST(LatencyStatsTest, NearestRankPercentiles) {
  LatencyStats stats;
  for (int v : {7, 1, 10, 3, 5, 9, 2, 8, 4, 6}) stats.Add(v);  // 1..10, shuffled
  EXPECT_EQ(stats.count(), 10u);
  EXPECT_DOUBLE_EQ(stats.Mean(), 5.5);
  EXPECT_EQ(stats.Min(), 1);
  EXPECT_EQ(stats.Max(), 10);
  EXPECT_EQ(stats.Percentile(0), 1);
  EXPECT_EQ(stats.Percentile(10), 1);  // rank ceil(1.0) = 1
  EXPECT_EQ(stats.Percentile(11), 2);  // rank ceil(1.1) = 2
  EXPECT_EQ(stats.Percentile(50), 5);  // rank 5, not the interpolated 5.5
  EXPECT_EQ(stats.Percentile(90), 9);  // rank 9 despite 0.9 * 10 rounding up in floating point
  EXPECT_EQ(stats.Percentile(99), 10);
  EXPECT_EQ(stats.Percentile(100), 10);
  EXPECT_EQ(stats.Percentile(150), 10) << "clamped";
  EXPECT_EQ(stats.samples()[0], 7) << "percentiles leave the arrival order alone";
}

TEST(LatencyStatsTest, SingleSampleAndMerge) {
  LatencyStats a;
  a.Add(0.25);
  EXPECT_EQ(a.Percentile(1), 0.25);
  EXPECT_EQ(a.Percentile(99), 0.25);
  LatencyStats b;
  b.Add(0.75);
  b.Add(0.5);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_DOUBLE_EQ(a.Mean(), 0.5);
  EXPECT_EQ(a.Percentile(50), 0.5);
}

TEST(LatencyStatsTest, EmptyIsNaN) {
  LatencyStats stats;
  EXPECT_EQ(stats.count(), 0u);
  EXPECT_TRUE(std::isnan(stats.Mean()));
  EXPECT_TRUE(std::isnan(stats.Min()));
  EXPECT_TRUE(std::isnan(stats.Percentile(50)));
}

}  // namespace
}  // namespace kvfleet::load
