#include "engine/sampler/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvfleet::engine {
namespace {

TEST(LogprobsTest, NormalizedAndOrdered) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprobs lp = ComputeLogprobs(logits, /*token=*/4, /*top_n=*/3);
  double total = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l));
  EXPECT_NEAR(lp.logprob, 0.5 - std::log(total), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // tie with 3 → lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_FLOAT_EQ(lp.top[0].second, lp.top[1].second);
}

TEST(LogprobsTest, LargeLogitsStayFinite) {
  const std::vector<float> logits = {1000.0f, 999.0f};
  const TokenLogprobs lp = ComputeLogprobs(logits, 1, 0);
  EXPECT_NEAR(lp.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_TRUE(lp.top.empty());
}

TEST(LogprobsTest, ParamsValidate) {
  EXPECT_TRUE((LogprobsParams{.enabled = true, .top_n = 20}).Validate().ok());
  EXPECT_EQ((LogprobsParams{.enabled = true, .top_n = 21}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((LogprobsParams{.enabled = false, .top_n = 2}).Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvfleet::engine
