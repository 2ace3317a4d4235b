// ChooseDraftLengths, StepCostModel and AcceptanceEstimate: the adaptive
// part of speculative decoding, without a model.
#include "engine/spec/draft_lengths.h"

#include <gtest/gtest.h>

#include "engine/request/acceptance_estimate.h"
#include "engine/spec/step_cost_model.h"

namespace kvfleet::engine::spec {
namespace {

// A step costs `fixed` + `per_token` × tokens, observed exactly at several sizes.
StepCostModel Learned(double fixed, double per_token) {
  StepCostModel cost;
  for (int i = 0; i < 200; ++i) {
    const int32_t tokens = 1 + (i * 7) % 40;
    cost.Observe(tokens, fixed + per_token * tokens);
  }
  return cost;
}

TEST(StepCostModelTest, RecoversTheLineFromObservations) {
  const StepCostModel cost = Learned(0.012, 0.004);
  EXPECT_NEAR(cost.fixed_seconds(), 0.012, 0.001);
  EXPECT_NEAR(cost.seconds_per_token(), 0.004, 0.0002);
}

TEST(StepCostModelTest, BeforeAnyObservationThePriorSetsTheShape) {
  StepCostModel cost(/*prior_fixed_tokens=*/4.0);
  EXPECT_NEAR(cost.fixed_seconds() / cost.seconds_per_token(), 4.0, 1e-9);
  // One size only: the scale follows it, the prior keeps the shape.
  for (int i = 0; i < 10; ++i) cost.Observe(1, 0.05);
  EXPECT_NEAR(cost.Seconds(1), 0.05, 0.01);
  EXPECT_GT(cost.fixed_seconds(), cost.seconds_per_token());
}

TEST(AcceptanceEstimateTest, FollowsRecentVerifications) {
  AcceptanceEstimate e(/*prior_rate=*/0.5);
  EXPECT_DOUBLE_EQ(e.rate(), 0.5);
  for (int i = 0; i < 20; ++i) e.Observe(4, 4);
  EXPECT_GT(e.rate(), 0.95);
  for (int i = 0; i < 20; ++i) e.Observe(4, 0);
  EXPECT_LT(e.rate(), 0.2);
  EXPECT_NEAR(AcceptanceEstimate(1.0, 1.0).ExpectedAccepted(3), 3.0, 1e-12);
}

TEST(DraftLengthsTest, AtBatchOneGoodAcceptanceDraftsLong) {
  const StepCostModel cost = Learned(0.012, 0.003);
  const DraftCandidate c{.acceptance = 0.9, .max_tokens = 8};
  const std::vector<int32_t> k = ChooseDraftLengths({&c, 1}, cost, {.tokens = 1, .produced = 1});
  EXPECT_GE(k[0], 5);
}

TEST(DraftLengthsTest, PoorAcceptanceDraftsNothing) {
  const StepCostModel cost = Learned(0.012, 0.003);
  const DraftCandidate c{.acceptance = 0.1, .max_tokens = 8};
  EXPECT_EQ(ChooseDraftLengths({&c, 1}, cost, {.tokens = 1, .produced = 1})[0], 0);
}

TEST(DraftLengthsTest, ALargeBatchTurnsSpeculationOff) {
  const StepCostModel cost = Learned(0.012, 0.003);
  std::vector<DraftCandidate> batch(32, {.acceptance = 0.7, .max_tokens = 8});
  for (int32_t k : ChooseDraftLengths(batch, cost, {.tokens = 32, .produced = 32})) EXPECT_EQ(k, 0);
  // The same requests alone would draft.
  EXPECT_GT(ChooseDraftLengths({batch.data(), 1}, cost, {.tokens = 1, .produced = 1})[0], 0);
}

TEST(DraftLengthsTest, TheBetterRequestGetsTheLongerDraftAndProposerCostShortensIt) {
  const StepCostModel cost = Learned(0.012, 0.003);
  const std::vector<DraftCandidate> two = {{.acceptance = 0.95, .max_tokens = 8}, {.acceptance = 0.6, .max_tokens = 8}};
  const std::vector<int32_t> k = ChooseDraftLengths(two, cost, {.tokens = 2, .produced = 2});
  EXPECT_GT(k[0], k[1]);
  const DraftCandidate cheap{.acceptance = 0.8, .max_tokens = 8};
  const DraftCandidate dear{.acceptance = 0.8, .max_tokens = 8, .propose_seconds_per_token = 0.006};
  EXPECT_LT(ChooseDraftLengths({&dear, 1}, cost, {.tokens = 1, .produced = 1})[0],
            ChooseDraftLengths({&cheap, 1}, cost, {.tokens = 1, .produced = 1})[0]);
}

TEST(DraftLengthsTest, ASetupCostMustBePaidByTheFirstGuess) {
  const StepCostModel cost = Learned(0.012, 0.003);
  const DraftCandidate ready{.acceptance = 0.9, .max_tokens = 8};
  const DraftCandidate behind{.acceptance = 0.9, .max_tokens = 8, .setup_seconds = 0.5};
  EXPECT_GT(ChooseDraftLengths({&ready, 1}, cost, {.tokens = 1, .produced = 1})[0], 0);
  EXPECT_EQ(ChooseDraftLengths({&behind, 1}, cost, {.tokens = 1, .produced = 1})[0], 0);
}

TEST(DraftLengthsTest, NeverPastMaxTokens) {
  const StepCostModel cost = Learned(0.1, 0.0001);
  const std::vector<DraftCandidate> c = {{.acceptance = 1.0, .max_tokens = 3}, {.acceptance = 1.0, .max_tokens = 0}};
  const std::vector<int32_t> k = ChooseDraftLengths(c, cost, {.tokens = 2, .produced = 2});
  EXPECT_EQ(k[0], 3);
  EXPECT_EQ(k[1], 0);
}

// With worths (a tree's nodes, each the chance it is kept), each guess is
// valued by its own worth, not by the request's rate: a confident first
// branch is verified deep, an unlikely one not at all.
TEST(ChooseDraftLengthsTest, GuessesWithWorthsAreValuedOneByOne) {
  const StepCostModel cost = Learned(0.030, 0.002);
  const std::vector<double> sure = {0.95, 0.9, 0.85, 0.8, 0.02, 0.01};
  const std::vector<double> unlikely = {0.01, 0.005};
  const std::vector<DraftCandidate> c = {
      {.acceptance = 0.0, .max_tokens = 6, .worths = sure},
      {.acceptance = 0.9, .max_tokens = 2, .worths = unlikely},
  };
  const std::vector<int32_t> k = ChooseDraftLengths(c, cost, {.tokens = 2, .produced = 2});
  EXPECT_EQ(k[0], 4);
  EXPECT_EQ(k[1], 0);
}

}  // namespace
}  // namespace kvfleet::engine::spec
