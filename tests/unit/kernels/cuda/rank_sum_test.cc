// The rank-ordered sum of an all-reduce's chunk on the CUDA emulation: bit
// for bit the host's ((v₀ + v₁) + v₂), whichever rank's chunk it is, with a
// value whose sum in another order differs (1e8, −1e8, 1).
#include "kernels/cuda/rank_sum.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/device_runtime.h"

namespace kvfleet::kernels::cuda {
namespace {

TEST(RankSumTest, SumsEachRanksValuesInRankOrder) {
  const int32_t ranks = 3;
  const int64_t count = 1000, stride = 1024;  // a padded chunk
  std::vector<std::vector<float>> values(ranks, std::vector<float>(count));
  for (int32_t q = 0; q < ranks; ++q) {
    for (int64_t i = 0; i < count; ++i)
      values[q][i] = 0.37f * static_cast<float>((i * 7919 + q * 104729) % 2001 - 1000);
  }
  const float ordered[] = {1e8f, -1e8f, 1.0f};
  for (int32_t q = 0; q < ranks; ++q) values[q][5] = ordered[q];
  std::vector<float> expected(values[0]);
  for (int32_t q = 1; q < ranks; ++q) {
    for (int64_t i = 0; i < count; ++i) expected[i] += values[q][i];
  }
  ASSERT_EQ(expected[5], 1.0f);
  auto stream = ::kvfleet::cuda::CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int32_t me = 0; me < ranks; ++me) {
    SCOPED_TRACE(me);
    // Host memory is device memory on the emulation.
    std::vector<float> mine = values[me], received(static_cast<size_t>(ranks * stride), -7.0f);
    for (int32_t q = 0; q < ranks; ++q) {
      if (q != me) std::copy(values[q].begin(), values[q].end(), received.begin() + q * stride);
    }
    LaunchSumInRankOrder(mine.data(), received.data(), stride, ranks, me, count, *stream);
    ASSERT_TRUE(::kvfleet::cuda::Synchronize(*stream).ok());
    EXPECT_EQ(mine, expected);
  }
  ::kvfleet::cuda::DestroyStream(*stream);
}

}  // namespace
}  // namespace kvfleet::kernels::cuda
