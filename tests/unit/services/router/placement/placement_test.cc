// Placement::Choose on hand-built clusters: each policy, the cost trade-off
// between a prefix hit and load, the affinity guard, KV pressure and fit,
// ties, draining and excluded workers, errors, the decision memory (a burst
// with a new shared prefix lands together; it expires), and thread safety.
#include "services/router/placement/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using std::chrono::milliseconds;
using testing::Busy;
using testing::Concat;
using testing::FakeClock;
using testing::Idle;
using testing::MakeRequest;
using testing::ScoreOf;
using testing::Tokens;
using testing::WithMatch;

constexpr int32_t kBs = 16;

Decision MustChoose(Placement& p, const PlacementRequest& r, const std::vector<WorkerCandidate>& c,
                    const absl::flat_hash_set<std::string>& exclude = {}) {
  absl::StatusOr<Decision> d = p.Choose(r, c, exclude);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Decision{};
}

class PlacementTest : public ::testing::Test {
 protected:
  Placement Make(PlacementOptions o = {}) { return Placement(o, clock_.Fn()); }
  FakeClock clock_;
};

TEST_F(PlacementTest, PrefixHitBeatsAColdIdleWorkerWhenTheSavingOutweighsTheLoad) {
  Placement p = Make();
  const PlacementRequest r = MakeRequest(Tokens(1, 12, kBs), kBs);
  // a: 2 uncached + 0.5 × (6 used + 2 new) = 6; b: 12 + 0.5 × 12 = 18.
  const Decision d = MustChoose(p, r, {WithMatch(Busy("a", 2, 6), 10), Idle("b")});
  EXPECT_EQ(d.worker_id, "a");
  EXPECT_EQ(d.endpoint, "a:50051");
  EXPECT_EQ(d.reason, Reason::kPrefixHit);
  EXPECT_EQ(d.matched_blocks, 10);
  EXPECT_DOUBLE_EQ(d.prefix_match_ratio, 160.0 / 192.0);
  EXPECT_TRUE(d.fits);
  ASSERT_EQ(d.scores.size(), 2u);
  EXPECT_DOUBLE_EQ(ScoreOf(d, "a").cost, 6.0);
  EXPECT_DOUBLE_EQ(ScoreOf(d, "b").cost, 18.0);
}

TEST_F(PlacementTest, PrefixHitLosesWhenTheWorkerIsMuchBusier) {
  Placement p = Make();
  const PlacementRequest r = MakeRequest(Tokens(1, 12, kBs), kBs);
  // a: 2 + 402 = 404 against b's 24.
  const Decision d = MustChoose(p, r, {WithMatch(Busy("a", 4, 400), 10), Idle("b")});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kCold);
  EXPECT_EQ(d.matched_blocks, 0);
  EXPECT_DOUBLE_EQ(d.prefix_match_ratio, 0.0);
}

TEST_F(PlacementTest, AffinityGuardKeepsAHotPrefixFromPilingUpOnOneWorker) {
  const PlacementRequest r = MakeRequest(Tokens(2, 100, kBs), kBs);
  // a holds the whole prompt and is cheapest (30 against 200), but runs 20
  // requests against none: 20 - 0 > 16 and 20 > 2 · 0.
  const std::vector<WorkerCandidate> cluster = {WithMatch(Busy("a", 20, 30), 100), Idle("b")};
  Placement guarded = Make();
  const Decision d = MustChoose(guarded, r, cluster);
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kAffinityGuard);
  EXPECT_TRUE(ScoreOf(d, "a").over_guard);
  EXPECT_FALSE(ScoreOf(d, "b").over_guard);
  EXPECT_LT(ScoreOf(d, "a").cost, ScoreOf(d, "b").cost);

  Placement unguarded = Make({.affinity_guard = false});
  EXPECT_EQ(MustChoose(unguarded, r, cluster).worker_id, "a");
}

TEST_F(PlacementTest, AffinityGuardNeedsBothTheMarginAndTheRatio) {
  const PlacementRequest r = MakeRequest(Tokens(2, 100, kBs), kBs);
  struct Case {
    int32_t hot_load, other_load;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{{16, 0, "a"},    // margin not exceeded
                                         {17, 0, "b"},    // margin exceeded, ratio too
                                         {40, 25, "a"},   // 15 over: margin not exceeded
                                         {60, 30, "a"},   // 30 over, but not more than 2x
                                         {61, 30, "b"}})  // both
  {
    Placement p = Make();
    const Decision d = MustChoose(p, r, {WithMatch(Busy("a", c.hot_load, 30), 100), Busy("b", c.other_load, 30)});
    EXPECT_EQ(d.worker_id, c.want) << c.hot_load << " vs " << c.other_load;
    EXPECT_EQ(d.reason, c.want == "a" ? Reason::kPrefixHit : Reason::kAffinityGuard);
  }
}

TEST_F(PlacementTest, AffinityGuardFallsBackToTheCheapestOfTheOthers) {
  Placement p = Make();
  const PlacementRequest r = MakeRequest(Tokens(2, 100, kBs), kBs);
  // c holds half the prompt: 50 + (10 + 50) = 110 beats idle b's 200.
  const Decision d = MustChoose(p, r, {WithMatch(Busy("a", 20, 30), 100), Idle("b"), WithMatch(Busy("c", 2, 10), 50)});
  EXPECT_EQ(d.worker_id, "c");
  EXPECT_EQ(d.reason, Reason::kAffinityGuard);
  EXPECT_EQ(d.matched_blocks, 50);
}

TEST_F(PlacementTest, AffinityGuardAvoidsAFullBatchWhenAnotherHasRoom) {
  const PlacementRequest r = MakeRequest(Tokens(2, 100, kBs), kBs);
  WorkerCandidate hot = WithMatch(Busy("a", 8, 30), 100);
  hot.max_num_seqs = 8;
  WorkerCandidate other = Busy("b", 2, 10);
  other.max_num_seqs = 8;
  Placement p = Make();
  Decision d = MustChoose(p, r, {hot, other});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kAffinityGuard);
  EXPECT_TRUE(ScoreOf(d, "a").saturated);
  // Every batch full: queueing anywhere, so the hit wins.
  other.load.running = 8;
  Placement q = Make();
  d = MustChoose(q, r, {hot, other});
  EXPECT_EQ(d.worker_id, "a");
  EXPECT_EQ(d.reason, Reason::kPrefixHit);
}

TEST_F(PlacementTest, KvPressurePenaltySteersAwayFromANearlyFullWorker) {
  const PlacementRequest r = MakeRequest(Tokens(3, 50, kBs), kBs);
  // a: 10 + (905 + 10) + 4 · (915 - 900) = 985; b: 50 + (850 + 50) = 950.
  const std::vector<WorkerCandidate> cluster = {WithMatch(Busy("a", 5, 905), 40), Busy("b", 5, 850)};
  Placement p = Make();
  const Decision d = MustChoose(p, r, cluster);
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_NEAR(ScoreOf(d, "a").kv_penalty, 60.0, 1e-9);
  EXPECT_DOUBLE_EQ(ScoreOf(d, "b").kv_penalty, 0.0);
  // Without the penalty the hit wins: 925 < 950.
  Placement no_penalty = Make({.kv_pressure_weight = 0});
  EXPECT_EQ(MustChoose(no_penalty, r, cluster).worker_id, "a");
}

TEST_F(PlacementTest, AWorkerThatCannotFitIsChosenOnlyIfNoneCan) {
  const PlacementRequest r = MakeRequest(Tokens(3, 20, kBs), kBs);
  // With the penalty off a is cheaper (10 + 1005 = 1015 against
  // 20 + 998 = 1018) but has 5 free blocks for its 10 new ones.
  Placement p = Make({.kv_pressure_weight = 0});
  const WorkerCandidate a = WithMatch(Busy("a", 1, 995), 10);
  Decision d = MustChoose(p, r, {a, Busy("b", 1, 978)});
  EXPECT_FALSE(ScoreOf(d, "a").fits);
  EXPECT_LT(ScoreOf(d, "a").cost, ScoreOf(d, "b").cost);
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_TRUE(d.fits);
  // Nobody fits: the cheapest anyway, flagged.
  Placement q = Make({.kv_pressure_weight = 0});
  d = MustChoose(q, r, {a, Busy("b", 1, 995)});
  EXPECT_EQ(d.worker_id, "a");
  EXPECT_FALSE(d.fits);
}

TEST_F(PlacementTest, TiesBreakByLoadThenUsedBlocksThenRotation) {
  const PlacementRequest r = MakeRequest(Tokens(4, 8, kBs), kBs);
  Placement p = Make();
  EXPECT_EQ(MustChoose(p, r, {Idle("c"), Idle("a"), Idle("b")}).worker_id, "a");
  // Same cost, fewer requests.
  Placement q = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
  EXPECT_EQ(MustChoose(q, r, {Busy("a", 3, 0), Busy("b", 1, 0)}).worker_id, "b");
  // Same cost and load: a's 10 used blocks (at decode_weight 0.5) against
  // b's 5 blocks of pending prefill.
  WorkerCandidate b = Idle("b");
  b.load.pending_prefill_tokens = 5 * kBs;
  const Decision d = MustChoose(q, r, {Busy("a", 0, 10), b});
  EXPECT_DOUBLE_EQ(ScoreOf(d, "a").cost, ScoreOf(d, "b").cost);
  EXPECT_EQ(d.worker_id, "b");
}

TEST_F(PlacementTest, DrainingAndExcludedWorkersAreSkipped) {
  const PlacementRequest r = MakeRequest(Tokens(5, 10, kBs), kBs);
  WorkerCandidate a = WithMatch(Idle("a"), 10);
  a.load.draining = true;
  for (Policy policy : {Policy::kPrefixAware, Policy::kLeastLoaded, Policy::kRoundRobin}) {
    Placement p = Make({.policy = policy});
    const Decision d = MustChoose(p, r, {a, WithMatch(Idle("b"), 10), Busy("c", 3, 50)}, {"b"});
    EXPECT_EQ(d.worker_id, "c") << PolicyName(policy);
    ASSERT_EQ(d.scores.size(), 1u);
    EXPECT_EQ(d.scores[0].worker_id, "c");
  }
}

TEST_F(PlacementTest, FailoverExcludesTheWorkerAlreadyTried) {
  Placement p = Make();
  const PlacementRequest r = MakeRequest(Tokens(5, 10, kBs), kBs);
  const std::vector<WorkerCandidate> cluster = {WithMatch(Idle("a"), 10), WithMatch(Busy("b", 1, 10), 6), Idle("c")};
  const Decision first = MustChoose(p, r, cluster);
  EXPECT_EQ(first.worker_id, "a");
  const Decision second = MustChoose(p, r, cluster, {first.worker_id});
  EXPECT_EQ(second.worker_id, "b");
  EXPECT_EQ(second.reason, Reason::kPrefixHit);
}

TEST_F(PlacementTest, NoCandidateIsUnavailableWithTheCounts) {
  Placement p = Make();
  const PlacementRequest r = MakeRequest(Tokens(5, 2, kBs), kBs);
  absl::StatusOr<Decision> d = p.Choose(r, {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("no live workers"), std::string::npos) << d.status();

  WorkerCandidate a = Idle("a"), b = Idle("b"), c = Idle("c");
  a.load.draining = b.load.draining = true;
  d = p.Choose(r, {a, b, c}, {"c"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("3 live, 2 draining, 1 already tried"), std::string::npos) << d.status();
}

TEST_F(PlacementTest, MalformedInputIsInvalidArgument) {
  Placement p = Make();
  PlacementRequest r = MakeRequest(Tokens(5, 4, kBs), kBs);
  PlacementRequest zero_block = r;
  zero_block.block_size = 0;
  PlacementRequest too_many_hashes = r;
  too_many_hashes.prompt_tokens = 4 * kBs - 1;
  PlacementRequest negative = r;
  negative.prompt_tokens = -1;
  negative.block_hashes.clear();
  for (const PlacementRequest& bad : {zero_block, too_many_hashes, negative}) {
    EXPECT_EQ(p.Choose(bad, {Idle("a")}).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(p.Choose(r, {Idle("a"), Idle("b"), Idle("a")}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Choose(r, {Idle("")}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PlacementTest, EmptyPromptGoesToTheLeastLoadedWorker) {
  Placement p = Make();
  const PlacementRequest r{.prompt_tokens = 0, .block_size = kBs};
  const Decision d = MustChoose(p, r, {Busy("a", 1, 20), Busy("b", 1, 5)});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kCold);
  EXPECT_DOUBLE_EQ(d.prefix_match_ratio, 0.0);
}

// Eight requests share a new 32-block system prompt (each has its own last
// block). The cachemanager reports no match anywhere, and no load change,
// for all of them: the workers' events have not arrived yet.
std::vector<PlacementRequest> Burst(int n) {
  std::vector<PlacementRequest> burst;
  for (int i = 0; i < n; ++i) burst.push_back(MakeRequest(Concat(Tokens(7, 32, kBs), Tokens(100 + i, 1, kBs)), kBs));
  return burst;
}
const std::vector<WorkerCandidate> kFourIdle = {Idle("w0"), Idle("w1"), Idle("w2"), Idle("w3")};

TEST_F(PlacementTest, RecentDecisionsLandABurstWithANewPrefixTogether) {
  Placement p = Make();
  const std::vector<PlacementRequest> burst = Burst(8);
  const Decision first = MustChoose(p, burst[0], kFourIdle);
  EXPECT_EQ(first.worker_id, "w0");
  EXPECT_EQ(first.reason, Reason::kCold);
  for (size_t i = 1; i < burst.size(); ++i) {
    clock_.Advance(milliseconds(2));
    const Decision d = MustChoose(p, burst[i], kFourIdle);
    EXPECT_EQ(d.worker_id, "w0") << i;
    EXPECT_EQ(d.reason, Reason::kRecentDecision) << i;
    EXPECT_EQ(d.matched_blocks, 32) << i;
    EXPECT_EQ(ScoreOf(d, "w0").reported_blocks, 0);
    EXPECT_EQ(ScoreOf(d, "w0").remembered_blocks, 32);
  }
  EXPECT_EQ(p.in_flight(), 8);
  EXPECT_EQ(p.remembered_blocks(), 32 + 8);
  // Still within the memory: remembered; the reports have not included any
  // of the 8, so they all still count in flight.
  clock_.Advance(milliseconds(4900));
  const Decision later = MustChoose(p, Burst(9)[8], kFourIdle);
  EXPECT_EQ(later.worker_id, "w0");
  EXPECT_EQ(later.reason, Reason::kRecentDecision);
  EXPECT_EQ(p.in_flight(), 9);
}

TEST_F(PlacementTest, DecisionMemoryExpiresAfterItsDuration) {
  Placement p = Make();
  const std::vector<PlacementRequest> burst = Burst(3);
  MustChoose(p, burst[0], kFourIdle);
  clock_.Advance(milliseconds(4999));
  EXPECT_EQ(MustChoose(p, burst[1], kFourIdle).reason, Reason::kRecentDecision);  // refreshes to 4999 + 5000
  clock_.Advance(milliseconds(5000));
  const Decision d = MustChoose(p, burst[2], kFourIdle);
  EXPECT_EQ(d.reason, Reason::kCold);
  EXPECT_EQ(d.matched_blocks, 0);
  EXPECT_EQ(p.remembered_blocks(), 33);  // only the decision just made
}

TEST_F(PlacementTest, WithoutMemoryABurstScattersAndWithoutInFlightItHerds) {
  const std::vector<PlacementRequest> burst = Burst(4);
  // In-flight load spreads what the memory does not hold together.
  Placement no_memory = Make({.decision_memory = milliseconds(0)});
  std::vector<std::string> chosen;
  for (const PlacementRequest& r : burst) chosen.push_back(MustChoose(no_memory, r, kFourIdle).worker_id);
  EXPECT_EQ(chosen, (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
  // With neither, stale reports make every worker tie: rotation alone
  // spreads them (by worker id they all went to w0).
  Placement neither = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
  chosen.clear();
  for (const PlacementRequest& r : burst) chosen.push_back(MustChoose(neither, r, kFourIdle).worker_id);
  EXPECT_EQ(chosen, (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
}

TEST_F(PlacementTest, AffinityGuardCountsTheBurstItself) {
  // Reports never change, yet after 17 requests in flight on w0 the guard
  // moves the next one: in-flight decisions are load too.
  Placement p = Make({.in_flight_window = milliseconds(10000)});
  const std::vector<PlacementRequest> burst = Burst(20);
  std::vector<Decision> d;
  for (const PlacementRequest& r : burst) d.push_back(MustChoose(p, r, kFourIdle));
  for (int i = 0; i < 17; ++i) EXPECT_EQ(d[i].worker_id, "w0") << i;
  EXPECT_EQ(d[17].worker_id, "w1");
  EXPECT_EQ(d[17].reason, Reason::kAffinityGuard);
  // w1 now holds the prefix too (remembered) and is far less loaded.
  EXPECT_EQ(d[18].worker_id, "w1");
  EXPECT_EQ(d[18].reason, Reason::kRecentDecision);
}

TEST_F(PlacementTest, ForgetDropsWhatTheRouterRemembersAboutAWorker) {
  Placement p = Make();
  const std::vector<PlacementRequest> burst = Burst(2);
  EXPECT_EQ(MustChoose(p, burst[0], kFourIdle).worker_id, "w0");
  p.Forget("w0");
  EXPECT_EQ(p.remembered_blocks(), 0);
  EXPECT_EQ(p.in_flight(), 0);
  const Decision d = MustChoose(p, burst[1], kFourIdle);
  EXPECT_EQ(d.reason, Reason::kCold);
}

TEST_F(PlacementTest, LeastLoadedPicksFewestRequestsThenFewestBlocks) {
  Placement p = Make({.policy = Policy::kLeastLoaded});
  const PlacementRequest r = MakeRequest(Tokens(6, 10, kBs), kBs);
  const Decision d = MustChoose(p, r, {WithMatch(Busy("a", 5, 10), 10), Busy("b", 2, 500), Busy("c", 2, 100)});
  EXPECT_EQ(d.worker_id, "c");
  EXPECT_EQ(d.reason, Reason::kLeastLoaded);
  // A burst against stale reports spreads by in-flight load.
  Placement q = Make({.policy = Policy::kLeastLoaded});
  std::vector<std::string> chosen;
  for (int i = 0; i < 4; ++i) chosen.push_back(MustChoose(q, r, {Idle("x"), Idle("y"), Idle("z")}).worker_id);
  EXPECT_EQ(chosen, (std::vector<std::string>{"x", "y", "z", "x"}));
}

TEST_F(PlacementTest, RoundRobinCyclesInWorkerIdOrder) {
  Placement p = Make({.policy = Policy::kRoundRobin});
  const PlacementRequest r = MakeRequest(Tokens(6, 3, kBs), kBs);
  std::vector<std::string> chosen;
  for (int i = 0; i < 6; ++i) {
    const Decision d = MustChoose(p, r, {Idle("c"), WithMatch(Idle("a"), 3), Busy("b", 9, 900)});
    EXPECT_EQ(d.reason, Reason::kRoundRobin);
    chosen.push_back(d.worker_id);
  }
  EXPECT_EQ(chosen, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
}

TEST_F(PlacementTest, PolicyCanBeOverriddenPerRequest) {
  Placement p = Make();
  PlacementRequest r = MakeRequest(Tokens(6, 10, kBs), kBs);
  r.policy = Policy::kLeastLoaded;  // what the router does while the cachemanager is unreachable
  const Decision d = MustChoose(p, r, {WithMatch(Busy("a", 3, 10), 10), Busy("b", 1, 10)});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kLeastLoaded);
}

TEST_F(PlacementTest, ConcurrentChoosersShareOneRoundRobinCounter) {
  Placement p({.policy = Policy::kRoundRobin});  // the real clock
  const PlacementRequest r = MakeRequest(Tokens(6, 3, kBs), kBs);
  const std::vector<WorkerCandidate> cluster = {Idle("a"), Idle("b"), Idle("c")};
  constexpr int kThreads = 4, kPerThread = 300;
  std::vector<std::map<std::string, int>> counts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<Decision> d = p.Choose(r, cluster);
        if (d.ok()) ++counts[t][d->worker_id];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, int> total;
  for (const auto& m : counts) {
    for (const auto& [w, n] : m) total[w] += n;
  }
  EXPECT_EQ(total, (std::map<std::string, int>{{"a", 400}, {"b", 400}, {"c", 400}}));
}

TEST_F(PlacementTest, ADecisionCountsInFlightUntilAReportIncludesItNotForAFixedWindow) {
  Placement p = Make();
  const std::vector<PlacementRequest> burst = Burst(2);
  const Decision d = *p.Choose(burst[0], {Idle("w0"), Idle("w1")});
  EXPECT_NE(d.router_instance, 0u);
  EXPECT_EQ(d.router_instance, p.router_instance());
  // Seconds later the reports still predate it (a long CPU step): it counts.
  clock_.Advance(milliseconds(3000));
  const Decision again = *p.Choose(burst[1], {Idle("w0"), Idle("w1")});
  EXPECT_EQ(p.in_flight(), 2);
  // w0's report now includes both (its newest admitted ticket is the second's).
  WorkerCandidate w0 = Idle(again.worker_id);
  w0.load.running = 2;
  w0.admitted_ticket = again.in_flight_ticket;
  WorkerCandidate other = Idle(again.worker_id == "w0" ? "w1" : "w0");
  other.admitted_ticket = d.worker_id == other.worker_id ? d.in_flight_ticket : 0;
  ASSERT_TRUE(p.Choose(burst[1], {w0, other}).ok());
  EXPECT_EQ(p.in_flight(), 1);  // only the decision just made
}

TEST_F(PlacementTest, TheMemoryLastsAsLongAsThePredictedPrefill) {
  Placement p = Make();  // decision_memory_min 1 s, factor 2
  const std::vector<PlacementRequest> burst = Burst(3);
  // 100 tokens/s: the 33-block (528-token) prompt takes 5.28 s to prefill;
  // remembered 1 + 2 × 5.28 = 11.56 s.
  WorkerCandidate slow = Idle("w0");
  slow.load.prefill_tokens_per_second = 100;
  WorkerCandidate other = Idle("w1");
  other.load.blocks_used = 1;  // so the first decision goes to w0
  const Decision first = *p.Choose(burst[0], {slow, other});
  ASSERT_EQ(first.worker_id, "w0");
  clock_.Advance(milliseconds(11000));  // the old constant 5 s would have forgotten
  const Decision later = *p.Choose(burst[1], {slow, other});
  EXPECT_EQ(later.worker_id, "w0");
  EXPECT_EQ(later.reason, Reason::kRecentDecision);
  // A fast worker's decision is short-lived: 10,000 tokens/s, 2 × 0.05 s + 1 s.
  Placement q = Make();
  WorkerCandidate fast = Idle("w0");
  fast.load.prefill_tokens_per_second = 10000;
  ASSERT_EQ(q.Choose(burst[0], {fast, other})->worker_id, "w0");
  clock_.Advance(milliseconds(1200));
  EXPECT_EQ(q.Choose(burst[1], {fast, other})->reason, Reason::kCold);
}

TEST_F(PlacementTest, ARefusedAttemptForgetsItsDecisionAtOnce) {
  Placement p = Make();
  const std::vector<PlacementRequest> burst = Burst(2);
  const Decision refused = *p.Choose(burst[0], {Idle("w0"), Idle("w1")});
  EXPECT_GT(p.remembered_blocks(), 0);
  p.Retract(refused, burst[0].block_hashes);
  EXPECT_EQ(p.remembered_blocks(), 0);
  EXPECT_EQ(p.in_flight(), 0);
  const Decision next = *p.Choose(burst[1], {Idle("w0"), Idle("w1")});
  EXPECT_EQ(next.reason, Reason::kCold);
  EXPECT_EQ(next.matched_blocks, 0);
}

TEST_F(PlacementTest, ExactTiesRotateInsteadOfFavouringTheLowestId) {
  for (Policy policy : {Policy::kPrefixAware, Policy::kLeastLoaded}) {
    // No memory, no in-flight: every decision sees the same idle cluster.
    Placement p = Make({.policy = policy, .decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
    std::map<std::string, int> per_worker;
    for (int i = 0; i < 30; ++i) {
      ++per_worker[p.Choose(MakeRequest(Tokens(i, 2, kBs), kBs), {Idle("a"), Idle("b"), Idle("c")})->worker_id];
    }
    EXPECT_EQ(per_worker, (std::map<std::string, int>{{"a", 10}, {"b", 10}, {"c", 10}})) << PolicyName(policy);
  }
}

TEST_F(PlacementTest, ASessionStaysOnItsHomeWorkerAndEveryRouterAgreesOnIt) {
  const std::vector<WorkerCandidate> idle = {Idle("w0"), Idle("w1"), Idle("w2"), Idle("w3")};
  std::map<std::string, int> homes;
  for (int s = 0; s < 40; ++s) {
    PlacementRequest r = MakeRequest(Tokens(300 + s, 4, kBs), kBs);
    r.session_id = "conversation-" + std::to_string(s);
    // Two routers with no shared state, and no memory or in-flight load to
    // tell them apart: the same home, every turn.
    Placement a = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
    Placement b = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
    const std::string home = a.Choose(r, idle)->worker_id;
    for (int turn = 0; turn < 3; ++turn) {
      EXPECT_EQ(a.Choose(r, idle)->worker_id, home) << r.session_id;
      EXPECT_EQ(b.Choose(r, idle)->worker_id, home) << r.session_id;
    }
    ++homes[home];
  }
  // Homes spread over the workers (40 sessions, 4 workers).
  EXPECT_EQ(homes.size(), 4u);
  for (const auto& [w, n] : homes) EXPECT_GE(n, 4) << w;
}

TEST_F(PlacementTest, ASessionYieldsToTheGuardAndToMeasuredOverlap) {
  PlacementRequest r = MakeRequest(Tokens(900, 8, kBs), kBs);
  r.session_id = "chat-1";
  const std::vector<WorkerCandidate> idle = {Idle("w0"), Idle("w1"), Idle("w2")};
  Placement probe = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
  const std::string home = probe.Choose(r, idle)->worker_id;
  // The home is overloaded: the guard sends the turn elsewhere.
  std::vector<WorkerCandidate> busy_home = idle;
  for (WorkerCandidate& c : busy_home) {
    if (c.worker_id == home) c = Busy(home, 40, 100);
  }
  Placement p = Make({.decision_memory = milliseconds(0), .in_flight_window = milliseconds(0)});
  const Decision moved = *p.Choose(r, busy_home);
  EXPECT_NE(moved.worker_id, home);
  // Another worker holds more of the conversation (the last turn ran
  // there): measured overlap wins over the hash.
  std::vector<WorkerCandidate> elsewhere = idle;
  const std::string other = home == "w0" ? "w1" : "w0";
  for (WorkerCandidate& c : elsewhere) {
    if (c.worker_id == other) c = WithMatch(c, 6);
  }
  EXPECT_EQ(p.Choose(r, elsewhere)->worker_id, other);
  // With equal overlap the home wins, with its own reason.
  for (WorkerCandidate& c : elsewhere) c = WithMatch(c, 6);
  const Decision back = *p.Choose(r, elsewhere);
  EXPECT_EQ(back.worker_id, home);
  EXPECT_TRUE(back.reason == Reason::kSession || back.reason == Reason::kPrefixHit) << ReasonName(back.reason);
}

// production-stack's router died of an unbounded prefix table: a flood of
// distinct prefixes and sessions must not grow anything past its cap.
TEST_F(PlacementTest, AFloodOfDistinctPrefixesAndSessionsStaysWithinTheCaps) {
  Placement p = Make({.memory_max_blocks = 1000, .max_in_flight = 100});
  const std::vector<WorkerCandidate> cluster = {Idle("w0"), Idle("w1"), Idle("w2"), Idle("w3")};
  for (int i = 0; i < 20000; ++i) {
    PlacementRequest r = MakeRequest(Tokens(100000 + i, 8, kBs), kBs);
    r.session_id = "session-" + std::to_string(i);
    ASSERT_TRUE(p.Choose(r, cluster).ok());
    ASSERT_LE(p.remembered_blocks(), 1000) << i;
    ASSERT_LE(p.in_flight(), 100) << i;
    clock_.Advance(milliseconds(1));
  }
  EXPECT_EQ(p.remembered_blocks(), 1000);
  EXPECT_EQ(p.in_flight(), 100);
}

}  // namespace
}  // namespace kvfleet::router
