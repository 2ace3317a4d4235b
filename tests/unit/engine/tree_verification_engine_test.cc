// Tree verification in the engine: a proposer's tree of guesses is
// verified in one pass and the path plain decoding takes is kept, token
// for token, whether the kept path is the first branch or not, whether the
// executor moves the kept path's KV or recomputes it, under small budgets
// and preemption, greedy and seeded.
#include <gtest/gtest.h>

#include "tests/unit/engine/speculative_engine_fixture.h"

namespace kvfleet::engine {
namespace {

class TreeVerificationEngineTest : public SpeculativeEngineTest {};

TEST_F(TreeVerificationEngineTest, TreeDraftsKeepEveryTokenAndTheKeptPathsKv) {
  const std::vector<EngineRequest> requests = MixedRequests(24, 7);
  const SchedulerConfig config{.max_num_batched_tokens = 96, .max_num_seqs = 32};
  const Run plain = RunAll(requests, {}, config);
  const auto answers = Answers(requests, plain.tokens);
  for (int32_t k : {2, 5, 12, 32}) {
    // The answer off the first branch: every kept guess but the first
    // branch's moves its KV, then later tokens attend to it.
    const Run oracle = RunAll(requests, {.proposer = "tree", .max_draft_tokens = k, .answers = &answers}, config);
    EXPECT_EQ(oracle.tokens, plain.tokens) << "k=" << k;
    EXPECT_GT(Accepted(oracle.stats), 0) << "k=" << k;
    const Run random = RunAll(requests, {.proposer = "tree", .max_draft_tokens = k}, config);
    EXPECT_EQ(random.tokens, plain.tokens) << "random trees, k=" << k;
    EXPECT_GT(Drafted(random.stats), 0);
  }
  // An executor that cannot move KV: the kept guesses are recomputed.
  const Run recomputed = RunAll(
      requests, {.proposer = "tree", .max_draft_tokens = 8, .answers = &answers, .executor_moves_kv = false}, config);
  EXPECT_EQ(recomputed.tokens, plain.tokens);
  EXPECT_GT(Accepted(recomputed.stats), 0);
  // Draft heads' own trees, fixed and adaptive.
  for (bool adaptive : {false, true}) {
    const Run heads =
        RunAll(requests, {.proposer = "heads", .max_draft_tokens = 8, .adaptive = adaptive, .heads_top_k = 3}, config);
    EXPECT_EQ(heads.tokens, plain.tokens) << "adaptive " << adaptive;
    if (!adaptive) {
      EXPECT_GT(Drafted(heads.stats), 0);
    }
  }
}

TEST_F(TreeVerificationEngineTest, TreeDraftsSurviveSmallBudgetsAndPreemption) {
  const std::vector<EngineRequest> requests = MixedRequests(12, 11);
  const Run plain = RunAll(requests, {}, {.max_num_batched_tokens = 512, .max_num_seqs = 32});
  const auto answers = Answers(requests, plain.tokens);
  int64_t preemptions = 0;
  for (int32_t budget : {2, 5, 9, 64}) {
    const Run spec = RunAll(requests, {.proposer = "tree", .max_draft_tokens = 8, .answers = &answers},
                            {.max_num_batched_tokens = budget, .max_num_seqs = 32, .growth_reserve_blocks = 0},
                            /*num_blocks=*/18);
    EXPECT_EQ(spec.tokens, plain.tokens) << "budget " << budget;
    preemptions += spec.stats.preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the pool was meant to force preemption";
}

}  // namespace
}  // namespace kvfleet::engine
