// Randomized properties of Placement::Choose over thousands of random
// clusters and requests (prompts from a few shared-prefix families, random
// loads, matches, draining and excluded workers, policies, a fake clock
// moving in random steps):
// - the chosen worker is a candidate, neither draining nor excluded, and
//   Decision::scores lists exactly the eligible candidates by worker id;
// - least_loaded's choice has the minimal load among them;
// - prefix_aware's choice fits if any candidate fits, and unless the
//   affinity guard moved it, has the lowest cost among those that fit;
//   when the guard moved it, the worker it avoided was over the guard and
//   the chosen one is not;
// - nothing eligible → UNAVAILABLE, never a choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "services/router/placement/placement.h"
#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using std::chrono::milliseconds;
using testing::Concat;
using testing::FakeClock;
using testing::MakeRequest;
using testing::Tokens;

constexpr int32_t kBs = 8;

WorkerCandidate RandomWorker(std::mt19937& rng, int i, int32_t hashes) {
  WorkerCandidate c;
  c.worker_id = "w" + std::to_string(i);
  c.endpoint = c.worker_id + ":1";
  c.matched_blocks = rng() % 3 == 0 ? 0 : static_cast<int32_t>(rng() % (hashes + 1));
  c.load.running = static_cast<int32_t>(rng() % 40);
  c.load.waiting = rng() % 4 == 0 ? static_cast<int32_t>(rng() % 10) : 0;
  c.load.blocks_total = rng() % 10 == 0 ? 0 : 50 + static_cast<int32_t>(rng() % 400);
  c.load.blocks_used = c.load.blocks_total > 0 ? static_cast<int32_t>(rng() % (c.load.blocks_total + 1)) : 0;
  c.load.blocks_free = c.load.blocks_total - c.load.blocks_used;
  c.load.pending_prefill_tokens = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 500) : 0;
  c.load.draining = rng() % 8 == 0;
  c.max_num_seqs = rng() % 2 == 0 ? 0 : 8 + static_cast<int32_t>(rng() % 40);
  return c;
}

TEST(PlacementRandomTest, ChoicesAreValidAndPoliciesKeepTheirPromises) {
  std::map<Reason, int> reasons;  // every reason must show up, or the run proves little
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    FakeClock clock;
    PlacementOptions options;
    options.affinity_guard_margin = static_cast<int32_t>(rng() % 20);
    options.decision_memory = milliseconds(rng() % 3000);
    Placement placement(options, clock.Fn());
    for (int step = 0; step < 300; ++step) {
      clock.Advance(milliseconds(rng() % 50));
      const int32_t family = static_cast<int32_t>(rng() % 4);
      const int32_t shared = static_cast<int32_t>(rng() % 30);
      PlacementRequest r =
          MakeRequest(Concat(Tokens(family, shared, kBs),
                             Tokens(1000 + static_cast<int32_t>(rng() % 50), rng() % 5, kBs, rng() % kBs)),
                      kBs);
      const Policy policy = static_cast<Policy>(rng() % 3);
      r.policy = policy;
      const int n = static_cast<int>(rng() % 8);
      std::vector<WorkerCandidate> candidates;
      for (int i = 0; i < n; ++i)
        candidates.push_back(RandomWorker(rng, i, static_cast<int32_t>(r.block_hashes.size())));
      std::shuffle(candidates.begin(), candidates.end(), rng);
      absl::flat_hash_set<std::string> exclude;
      for (const WorkerCandidate& c : candidates) {
        if (rng() % 6 == 0) exclude.insert(c.worker_id);
      }
      std::set<std::string> eligible;
      for (const WorkerCandidate& c : candidates) {
        if (!c.load.draining && !exclude.contains(c.worker_id)) eligible.insert(c.worker_id);
      }
      const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);

      absl::StatusOr<Decision> got = placement.Choose(r, candidates, exclude);
      if (eligible.empty()) {
        ASSERT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << where;
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status() << " " << where;
      const Decision& d = *got;
      ++reasons[d.reason];
      ASSERT_TRUE(eligible.contains(d.worker_id)) << where;
      EXPECT_EQ(d.endpoint, d.worker_id + ":1") << where;
      std::vector<std::string> scored;
      const CandidateScore* chosen = nullptr;
      for (const CandidateScore& s : d.scores) {
        scored.push_back(s.worker_id);
        if (s.worker_id == d.worker_id) chosen = &s;
      }
      ASSERT_EQ(scored, std::vector<std::string>(eligible.begin(), eligible.end())) << where;
      ASSERT_NE(chosen, nullptr);
      EXPECT_GE(d.prefix_match_ratio, 0.0);
      EXPECT_LE(d.prefix_match_ratio, 1.0);
      EXPECT_EQ(d.matched_blocks, chosen->matched_blocks);

      if (policy == Policy::kLeastLoaded) {
        EXPECT_EQ(d.reason, Reason::kLeastLoaded);
        for (const CandidateScore& s : d.scores) EXPECT_LE(chosen->load, s.load) << where;
      } else if (policy == Policy::kRoundRobin) {
        EXPECT_EQ(d.reason, Reason::kRoundRobin);
      } else {
        const bool any_fits =
            std::any_of(d.scores.begin(), d.scores.end(), [](const CandidateScore& s) { return s.fits; });
        EXPECT_EQ(chosen->fits, any_fits) << where;
        if (d.reason == Reason::kAffinityGuard) {
          // Some cheaper worker was over the guard; the chosen one is not
          // (unless every worker in the tier was, when the least loaded is taken).
          bool avoided = false;
          for (const CandidateScore& s : d.scores) {
            if ((s.fits || !any_fits) && s.cost <= chosen->cost && s.over_guard && s.matched_blocks > 0) avoided = true;
          }
          EXPECT_TRUE(avoided) << where;
        } else {
          EXPECT_FALSE(chosen->over_guard) << where;
          for (const CandidateScore& s : d.scores) {
            if (s.fits || !any_fits) {
              EXPECT_LE(chosen->cost, s.cost) << where << " vs " << s.worker_id;
            }
          }
          EXPECT_EQ(d.reason == Reason::kCold, chosen->matched_blocks == 0) << where;
        }
      }
    }
  }
  for (Reason r : {Reason::kPrefixHit, Reason::kRecentDecision, Reason::kCold, Reason::kAffinityGuard,
                   Reason::kLeastLoaded, Reason::kRoundRobin}) {
    EXPECT_GT(reasons[r], 10) << ReasonName(r);
  }
}

}  // namespace
}  // namespace kvfleet::router
