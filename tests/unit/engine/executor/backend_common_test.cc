#include "engine/executor/backend_common.h"

#include <gtest/gtest.h>

namespace kvfleet::engine {
namespace {

// LongRoPE's factor set follows the context the executor serves, never a
// step's length: a token rotates the same alone and batched.
TEST(RopeParamsOfTest, TheFactorsFollowTheServedContext) {
  model::RopeConfig rope{.dim = 4, .pairing = model::RopePairing::kHalves, .freq_factors = {1, 2}};
  rope.long_freq_factors = {3, 4};
  rope.long_factors_above = 4096;
  rope.magnitude = 1.25;
  model::ModelConfig c;
  c.head_dim = 8;
  c.context_length = 8192;
  const kernels::RopeParams p = RopeParamsOf(c, rope);
  EXPECT_EQ(p.freq_factors, rope.long_freq_factors.data());
  EXPECT_EQ(p.magnitude, 1.25);
  EXPECT_EQ(p.rot_dim, 4);
  EXPECT_EQ(p.head_dim, 8);
  EXPECT_EQ(p.mode, kernels::RopeMode::kHalves);
  c.context_length = 4096;
  EXPECT_EQ(RopeParamsOf(c, rope).freq_factors, rope.freq_factors.data());
  rope.freq_factors.clear();
  rope.long_freq_factors.clear();
  EXPECT_EQ(RopeParamsOf(c, rope).freq_factors, nullptr);
}

}  // namespace
}  // namespace kvfleet::engine
