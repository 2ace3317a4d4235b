// AcceptanceByEvidence: each evidence level learns its own rate, a draft
// without evidence falls back to the request's, and the adaptive length
// then keeps a long match's draft and cuts a short match's.
#include "engine/spec/acceptance_by_evidence.h"

#include <gtest/gtest.h>

#include "engine/spec/draft_lengths.h"
#include "engine/spec/step_cost_model.h"

namespace kvfleet::engine::spec {
namespace {

TEST(AcceptanceByEvidenceTest, EachLevelLearnsItsOwnRate) {
  AcceptanceByEvidence by_evidence;
  EXPECT_EQ(AcceptanceByEvidence::Level(0), 0);
  EXPECT_EQ(AcceptanceByEvidence::Level(2), 2);
  EXPECT_EQ(AcceptanceByEvidence::Level(5), 4);
  EXPECT_EQ(AcceptanceByEvidence::Level(24), 7);
  // Long matches keep everything, two-token matches keep little.
  for (int i = 0; i < 20; ++i) {
    by_evidence.Observe(16, 8, 8);
    by_evidence.Observe(2, 8, 1);
  }
  EXPECT_GT(by_evidence.Rate(20, 0.5), 0.9);  // 20 and 16 share a level
  EXPECT_LT(by_evidence.Rate(2, 0.5), 0.6);
  EXPECT_DOUBLE_EQ(by_evidence.Rate(3, 0.5), 0.5);    // nothing seen at 3: the prior
  EXPECT_DOUBLE_EQ(by_evidence.Rate(0, 0.25), 0.25);  // no evidence: the fallback
  // So the adaptive length keeps a long match's draft and cuts a short one's.
  StepCostModel cost;
  for (int i = 0; i < 50; ++i) {
    cost.Observe(1, 0.010);
    cost.Observe(9, 0.014);
  }
  const DraftCandidate candidates[] = {{.acceptance = by_evidence.Rate(16, 0.5), .max_tokens = 8},
                                       {.acceptance = by_evidence.Rate(2, 0.5), .max_tokens = 8}};
  const std::vector<int32_t> k = ChooseDraftLengths(candidates, cost, {.tokens = 1, .produced = 1});
  EXPECT_GT(k[0], k[1]);
  EXPECT_EQ(k[0], 8);
}

}  // namespace
}  // namespace kvfleet::engine::spec
