// Whether a request's prefill is split off to a prefill worker
// (split_policy.h), and the decode half's pull from the prefill worker
// that placement prices as a handoff.
#include "services/router/placement/split_policy.h"

#include <gtest/gtest.h>

#include "services/router/placement/placement.h"
#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using testing::Idle;
using testing::MakeRequest;
using testing::Tokens;
using testing::WithMatch;

constexpr int32_t kBs = 16;

// 200 blocks of prompt (3,200 tokens) and a 5-token tail.
PlacementRequest LongPrompt() { return MakeRequest(Tokens(3, 200, kBs, 5), kBs); }

Decision On(const WorkerCandidate& c) {
  Decision d;
  d.worker_id = c.worker_id;
  d.matched_blocks = c.matched_blocks;
  return d;
}

TEST(SplitPolicyTest, ALongUncachedPromptIsSplitAndAShortOrCachedOneIsNot) {
  const SplitOptions split{.min_uncached_tokens = 2048};
  const PlacementOptions placement;
  const PlacementRequest request = LongPrompt();
  const WorkerCandidate cold = Idle("d0");
  SplitVerdict v = DecideSplit(split, placement, request, On(cold), cold, /*prefill_worker_live=*/true);
  EXPECT_TRUE(v.split);
  EXPECT_EQ(v.reason, SplitReason::kLongUncached);
  EXPECT_EQ(v.uncached_tokens, 3205);
  // 150 of its 200 blocks cached there: 805 tokens left, under the threshold.
  const WorkerCandidate warm = WithMatch(Idle("d0"), 150);
  v = DecideSplit(split, placement, request, On(warm), warm, true);
  EXPECT_FALSE(v.split);
  EXPECT_EQ(v.reason, SplitReason::kShort);
  EXPECT_EQ(v.uncached_tokens, 805);
  // Blocks the decode worker would pull from a peer count as held too.
  Decision pulling = On(cold);
  pulling.peer_pull = PeerPull{.worker_id = "d1", .endpoint = "d1:50052", .blocks = 180};
  EXPECT_EQ(DecideSplit(split, placement, request, pulling, cold, true).reason, SplitReason::kShort);
  const PlacementRequest short_prompt = MakeRequest(Tokens(3, 10, kBs), kBs);
  EXPECT_EQ(DecideSplit(split, placement, short_prompt, On(cold), cold, true).reason, SplitReason::kShort);
}

TEST(SplitPolicyTest, NoLivePrefillWorkerOrTheSwitchOffKeepsItWhole) {
  const PlacementOptions placement;
  const WorkerCandidate cold = Idle("d0");
  EXPECT_EQ(DecideSplit({}, placement, LongPrompt(), On(cold), cold, false).reason, SplitReason::kNoPrefillWorker);
  EXPECT_EQ(DecideSplit({.enabled = false}, placement, LongPrompt(), On(cold), cold, true).reason,
            SplitReason::kDisabled);
  EXPECT_FALSE(SplitOptions{.min_uncached_tokens = 0}.Validate().ok());
}

// The split is priced at the link rate: a link too slow to beat computing
// keeps the request whole; a measured pull time (which waiting behind
// other pulls inflates) does not, and unknown figures do not stop a split.
TEST(SplitPolicyTest, APullPricedAtOrAboveComputingAtTheLinkRateKeepsItWhole) {
  WorkerCandidate d = Idle("d0");
  d.load.prefill_tokens_per_second = 1000.0;  // 16 ms a block
  d.load.kv_block_bytes = 1 << 20;
  const PlacementOptions slow_link{.peer_pull_assumed_bytes_per_second = 32e6};  // 33 ms a block
  SplitVerdict v = DecideSplit({}, slow_link, LongPrompt(), On(d), d, true);
  EXPECT_FALSE(v.split);
  EXPECT_EQ(v.reason, SplitReason::kPullPricedOut);
  const PlacementOptions fast_link;  // 1 GB/s: 1 ms a block
  EXPECT_TRUE(DecideSplit({}, fast_link, LongPrompt(), On(d), d, true).split);
  WorkerCandidate queued = d;
  queued.load.peer_pull_seconds_per_block = 0.5;
  EXPECT_TRUE(DecideSplit({}, fast_link, LongPrompt(), On(queued), queued, true).split)
      << "a measured pull time that includes queueing must not price splits out for good";
  WorkerCandidate unmeasured = Idle("d0");
  EXPECT_TRUE(DecideSplit({}, slow_link, LongPrompt(), On(unmeasured), unmeasured, true).split);
}

// The decode half: the prefill worker is no candidate, yet the chosen
// decode worker pulls the prompt's blocks from it under any policy, even
// before any pull or prefill was measured, and however slow its earlier
// pulls were; only a link slower than computing recomputes.
TEST(SplitPolicyTest, TheDecodeHalfPullsFromThePrefillWorker) {
  for (const Policy policy : {Policy::kPrefixAware, Policy::kLeastLoaded, Policy::kRoundRobin}) {
    Placement p(PlacementOptions{.policy = policy});
    PlacementRequest request = LongPrompt();
    request.handoff_source = HandoffSource{.worker_id = "p0", .endpoint = "p0:50052", .blocks = 200};
    const absl::StatusOr<Decision> d = p.Choose(request, {Idle("d0"), Idle("d1")});
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(d->peer_pull.has_value()) << PolicyName(policy);
    EXPECT_EQ(d->peer_pull->worker_id, "p0");
    EXPECT_EQ(d->peer_pull->endpoint, "p0:50052");
    EXPECT_EQ(d->peer_pull->blocks, 200);
  }
  PlacementRequest request = LongPrompt();
  request.handoff_source = HandoffSource{.worker_id = "p0", .endpoint = "p0:50052", .blocks = 200};
  WorkerCandidate queued = Idle("d0");
  queued.load.prefill_tokens_per_second = 1000.0;
  queued.load.kv_block_bytes = 1 << 20;
  queued.load.peer_pull_seconds_per_block = 0.5;
  Placement fast(PlacementOptions{});
  const absl::StatusOr<Decision> pulled = fast.Choose(request, {queued});
  ASSERT_TRUE(pulled.ok());
  EXPECT_TRUE(pulled->peer_pull.has_value());
  Placement slow(PlacementOptions{.peer_pull_assumed_bytes_per_second = 32e6});
  const absl::StatusOr<Decision> d = slow.Choose(request, {queued});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->peer_pull.has_value());
  EXPECT_TRUE(d->pull_declined);
}

}  // namespace
}  // namespace kvfleet::router
