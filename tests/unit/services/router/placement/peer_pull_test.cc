// Peer prefix fetch in placement: the price of a pull (cost_model.h) and
// the decisions it changes (Placement::Choose's PeerPull).
#include <gtest/gtest.h>

#include "services/router/placement/cost_model.h"
#include "services/router/placement/placement.h"
#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using testing::FakeClock;
using testing::Idle;
using testing::MakeRequest;
using testing::ScoreOf;
using testing::Tokens;
using testing::WithMatch;

constexpr int32_t kBs = 16;

// A worker that prefills 1,000 tokens/s (16 ms a block) and has pulled at
// `pull_seconds_per_block` (0: never).
WorkerCandidate Measured(const std::string& id, double pull_seconds_per_block, int32_t matched = 0) {
  WorkerCandidate c = WithMatch(Idle(id), matched);
  c.load.prefill_tokens_per_second = 1000.0;
  c.load.peer_pull_seconds_per_block = pull_seconds_per_block;
  c.load.kv_block_bytes = 1 << 20;
  c.kv_transfer_endpoint = id + ":50052";
  return c;
}

TEST(PeerPullCostTest, APullCostsItsMeasuredTimeOverThePrefillTimeOfABlock) {
  const PlacementOptions o;
  EXPECT_DOUBLE_EQ(PeerPullBlockCost(o, Measured("w", 0.004).load, kBs), 0.25);
  EXPECT_DOUBLE_EQ(PeerPullBlockCost(o, Measured("w", 0.032).load, kBs), 2.0) << "not capped: slower than computing";
  // Before its first pull: a block's bytes at the assumed bandwidth.
  EXPECT_DOUBLE_EQ(PeerPullBlockCost({.peer_pull_assumed_bytes_per_second = 1 << 30}, Measured("w", 0).load, kBs),
                   (1.0 / 1024.0) / 0.016);
  WorkerCandidate unknown = Measured("w", 0.004);
  unknown.load.prefill_tokens_per_second = 0;
  EXPECT_DOUBLE_EQ(PeerPullBlockCost(o, unknown.load, kBs), 1.0) << "no prefill rate: priced as computing";
  EXPECT_DOUBLE_EQ(PeerPullBlockCost(o, unknown.load, kBs, 2000.0), 0.5) << "the source's rate stands in";
  WorkerCandidate sizeless = Measured("w", 0);
  sizeless.load.kv_block_bytes = 0;
  EXPECT_DOUBLE_EQ(PeerPullBlockCost(o, sizeless.load, kBs), 1.0);
}

TEST(PeerPullCostTest, PulledBlocksCountAtTheirPriceInTheUncachedPrefill) {
  const PlacementRequest r = MakeRequest(Tokens(1, 10, kBs, 5), kBs);  // 10 full blocks + 5 tokens
  const PeerSource source{.worker_id = "a", .blocks = 10};
  const WorkerCandidate b = Measured("b", 0.004, /*matched=*/2);
  const CandidateScore alone = ScoreCandidate(PlacementOptions{}, r, b, 0, {});
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, b, 0, {}, &source);
  EXPECT_EQ(s.peer_blocks, 8);
  EXPECT_DOUBLE_EQ(s.pull_blocks, 8 * 0.25);
  EXPECT_DOUBLE_EQ(s.uncached_prefill_blocks, alone.uncached_prefill_blocks - 8 + 2.0);
  EXPECT_EQ(s.new_blocks, alone.new_blocks) << "pulled blocks are still new memory on the worker";
  EXPECT_DOUBLE_EQ(s.cost, alone.cost - 6.0);
  // The source itself, a pull slower than computing, and a peer with less.
  EXPECT_EQ(ScoreCandidate(PlacementOptions{}, r, Measured("a", 0.004, 10), 0, {}, &source).peer_blocks, 0);
  EXPECT_EQ(ScoreCandidate(PlacementOptions{}, r, Measured("b", 0.032, 2), 0, {}, &source).peer_blocks, 0);
  EXPECT_EQ(ScoreCandidate(PlacementOptions{}, r, Measured("b", 0.004, 10), 0, {}, &source).peer_blocks, 0);
}

TEST(PeerPullCostTest, ABlockThatEndsThePromptIsNeverPulled) {
  const PlacementRequest r = MakeRequest(Tokens(1, 10, kBs), kBs);  // exactly 10 blocks
  const PeerSource source{.worker_id = "a", .blocks = 10};
  EXPECT_EQ(ScoreCandidate(PlacementOptions{}, r, Measured("b", 0.004), 0, {}, &source).peer_blocks, 9);
}

class PeerPullPlacementTest : public ::testing::Test {
 protected:
  Decision Choose(Placement& placement, const PlacementRequest& r, std::vector<WorkerCandidate> candidates) {
    absl::StatusOr<Decision> d = placement.Choose(r, std::move(candidates));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : Decision{};
  }
  FakeClock clock_;
};

// A holds 60 of the 64 blocks but has 600 prompt tokens queued; B is idle
// and pulls at a twentieth of its prefill time. Computing on B costs more
// than waiting on A; pulling to B costs less.
TEST_F(PeerPullPlacementTest, ALessLoadedWorkerPlusAPullBeatsALoadedWorkerThatHoldsThePrefix) {
  const PlacementRequest r = MakeRequest(Tokens(7, 64, kBs, 3), kBs);
  WorkerCandidate a = Measured("a", 0.0008, 60);
  a.load.pending_prefill_tokens = 600;
  const WorkerCandidate b = Measured("b", 0.0008);

  Placement pulling({}, clock_.Fn());
  const Decision d = Choose(pulling, r, {a, b});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kPeerPull);
  ASSERT_TRUE(d.peer_pull.has_value());
  EXPECT_EQ(d.peer_pull->worker_id, "a");
  EXPECT_EQ(d.peer_pull->endpoint, "a:50052");
  EXPECT_EQ(d.peer_pull->blocks, 60);
  EXPECT_EQ(ScoreOf(d, "b").peer_blocks, 60);

  Placement computing({.peer_pull = false}, clock_.Fn());
  const Decision off = Choose(computing, r, {a, b});
  EXPECT_EQ(off.worker_id, "a");
  EXPECT_FALSE(off.peer_pull.has_value());
  EXPECT_FALSE(off.pull_declined) << "pulls off: nothing was priced";
}

// A pull replaces a recompute, not a hit: when only the pull's discount
// makes the puller cheaper, the holder's decode load (a weight, not
// seconds) does not move the request to a puller that would start it
// later. A puller that would have won computing the prefix pulls it.
TEST_F(PeerPullPlacementTest, APullReplacesARecomputeNotAHit) {
  const PlacementRequest r = MakeRequest(Tokens(7, 64, kBs, 3), kBs);
  WorkerCandidate a = Measured("a", 0.0008, 60);
  a.load.running = 3;
  a.load.blocks_used = 150;
  a.load.blocks_free = 850;
  const WorkerCandidate b = Measured("b", 0.0008);
  Placement placement({}, clock_.Fn());
  const Decision d = Choose(placement, r, {a, b});
  EXPECT_LT(ScoreOf(d, "b").cost, ScoreOf(d, "a").cost) << "by cost alone, b with the pull";
  EXPECT_EQ(d.worker_id, "a");
  EXPECT_EQ(d.reason, Reason::kPrefixHit);
  EXPECT_FALSE(d.peer_pull.has_value());
  // Under decode load that sent the request to b even computing it (and
  // past the KV-pressure threshold), b now pulls instead of computing.
  for (const int32_t used : {400, 950}) {
    a.load.blocks_used = used;
    a.load.blocks_free = 1000 - used;
    Placement busy({}, clock_.Fn());
    const Decision p = Choose(busy, r, {a, b});
    EXPECT_EQ(p.worker_id, "b") << used;
    EXPECT_EQ(p.reason, Reason::kPeerPull) << used;
    EXPECT_TRUE(p.peer_pull.has_value()) << used;
    Placement computing({.peer_pull = false}, clock_.Fn());
    EXPECT_EQ(Choose(computing, r, {a, b}).worker_id, "b") << "the same choice without pulls, computing";
  }
}

TEST_F(PeerPullPlacementTest, ASlowPullIsDeclinedAndCounted) {
  const PlacementRequest r = MakeRequest(Tokens(7, 64, kBs, 3), kBs);
  WorkerCandidate a = Measured("a", 0.004, 60);
  a.load.pending_prefill_tokens = 6000;  // A is far behind: B computes
  const WorkerCandidate slow = Measured("b", 0.032);
  Placement placement({}, clock_.Fn());
  const Decision d = Choose(placement, r, {a, slow});
  EXPECT_EQ(d.worker_id, "b");
  EXPECT_EQ(d.reason, Reason::kCold);
  EXPECT_FALSE(d.peer_pull.has_value());
  EXPECT_TRUE(d.pull_declined);
}

TEST_F(PeerPullPlacementTest, OnlyAWorkerWithATransferAddressIsASourceAndTheMostHeldWins) {
  const PlacementRequest r = MakeRequest(Tokens(7, 64, kBs, 3), kBs);
  WorkerCandidate a = Measured("a", 0.0008, 60);
  a.load.pending_prefill_tokens = 1200;
  a.kv_transfer_endpoint.clear();
  WorkerCandidate c = Measured("c", 0.0008, 30);
  c.load.pending_prefill_tokens = 6000;
  const WorkerCandidate b = Measured("b", 0.0008);
  Placement placement({}, clock_.Fn());
  const Decision d = Choose(placement, r, {a, b, c});
  ASSERT_TRUE(d.peer_pull.has_value());
  EXPECT_EQ(d.peer_pull->worker_id, "c") << "a serves no transfers";
  EXPECT_EQ(d.peer_pull->blocks, 30);
  a.kv_transfer_endpoint = "a:50052";
  Placement fresh({}, clock_.Fn());  // the first placement remembers b holding it all
  const Decision with_a = Choose(fresh, r, {a, b, c});
  ASSERT_TRUE(with_a.peer_pull.has_value());
  EXPECT_EQ(with_a.peer_pull->worker_id, "a");
}

// The affinity guard moves a hot prefix off an overloaded worker; the
// worker it moves to pulls the prefix instead of computing it.
TEST_F(PeerPullPlacementTest, TheWorkerTheGuardChoosesPullsThePrefix) {
  const PlacementRequest r = MakeRequest(Tokens(7, 8, kBs, 3), kBs);
  WorkerCandidate hot = Measured("hot", 0.004, 8);
  hot.load.running = 40;
  const WorkerCandidate idle = Measured("idle", 0.004);
  Placement placement({}, clock_.Fn());
  const Decision d = Choose(placement, r, {hot, idle});
  EXPECT_EQ(d.worker_id, "idle");
  EXPECT_EQ(d.reason, Reason::kAffinityGuard);
  ASSERT_TRUE(d.peer_pull.has_value());
  EXPECT_EQ(d.peer_pull->blocks, 8);
}

}  // namespace
}  // namespace kvfleet::router
