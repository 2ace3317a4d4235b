#include "services/cachemanager/index/kv_map.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvfleet::cachemanager {
namespace {

using std::chrono::milliseconds;

std::vector<BlockHash> Prefix(const std::string& seed, int blocks) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < blocks * 16; ++i) tokens.push_back(static_cast<int32_t>(seed.size() * 31 + i));
  return HashFullBlocks(RootBlockHash("m", seed), tokens, 16);
}

WorkerDescriptor Worker(const std::string& id, uint64_t incarnation, const std::string& model = "m") {
  return {.worker_id = id, .incarnation = incarnation, .endpoint = id + ":1", .model_id = model, .block_size = 16,
          .capacity_blocks = 100};
}

KvEventBatch Batch(const std::string& id, uint64_t incarnation, uint64_t seq, std::vector<KvEventRecord> events) {
  return {.worker_id = id, .incarnation = incarnation, .sequence = seq, .events = std::move(events)};
}

KvEventRecord Snapshot(std::vector<BlockHash> h) { return {.kind = KvEventRecord::Kind::kSnapshot, .hashes = h}; }
KvEventRecord Stored(std::vector<BlockHash> h) { return {.kind = KvEventRecord::Kind::kStored, .hashes = h}; }

int32_t MatchedFor(const std::vector<WorkerOverlapInfo>& overlaps, const std::string& id) {
  for (const auto& o : overlaps) {
    if (o.worker.descriptor.worker_id == id) return o.matched_blocks;
  }
  return -1;  // not listed
}

class KvMapTest : public ::testing::Test {
 protected:
  KvMap map_{{.liveness_deadline = milliseconds(100)}};
  Clock::time_point t0_ = Clock::now();
};

TEST_F(KvMapTest, EachWorkerIsFoundWithTheLeadingBlocksItHolds) {
  const auto a = Prefix("a", 4), b = Prefix("b", 3);
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  ASSERT_TRUE(map_.Register(Worker("w2", 1), t0_).ok());
  ASSERT_TRUE(map_.Register(Worker("other-model", 1, "m2"), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(a)}), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w2", 1, 1, {Snapshot({}), Stored(b)}), t0_).ok());
  const auto overlaps = map_.FindOverlaps("m", a);
  ASSERT_EQ(overlaps.size(), 2u) << "every live worker of the model, matched or not";
  EXPECT_EQ(MatchedFor(overlaps, "w1"), 4);
  EXPECT_EQ(MatchedFor(overlaps, "w2"), 0);
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", b), "w2"), 3);
  EXPECT_EQ(map_.List("").size(), 3u);
  EXPECT_EQ(map_.List("m")[0].indexed_blocks, 4);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

TEST_F(KvMapTest, UnknownWorkersAndBackwardSequencesAreRefusedWholeBeforeAnythingApplies) {
  const auto a = Prefix("a", 2);
  ASSERT_TRUE(map_.Register(Worker("w1", 7), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w1", 7, 1, {Snapshot(a)}), t0_).ok());
  EXPECT_EQ(map_.Apply(Batch("nobody", 1, 1, {}), t0_).status().code(), absl::StatusCode::kNotFound);
  const auto stale = map_.Apply(Batch("w1", 6, 2, {Stored(Prefix("x", 1))}), t0_);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(stale.status().message().find("Register"), std::string::npos);
  const auto backwards = map_.Apply(Batch("w1", 7, 1, {{.kind = KvEventRecord::Kind::kCleared}}), t0_);
  EXPECT_EQ(backwards.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(backwards.status().message().find("sequence 1 does not follow 1"), std::string::npos);
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w1"), 2) << "the refused Cleared must not have applied";
  EXPECT_EQ(map_.counters().rejected_batches, 3);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

TEST_F(KvMapTest, SnapshotIsAskedForOnceAfterRegisterAndAgainAfterAGap) {
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  auto r = map_.Apply(Batch("w1", 1, 1, {Stored(Prefix("a", 1))}), t0_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->send_snapshot);
  r = map_.Apply(Batch("w1", 1, 2, {}), t0_);
  EXPECT_FALSE(r->send_snapshot) << "asked already";
  r = map_.Apply(Batch("w1", 1, 3, {Snapshot(Prefix("a", 2))}), t0_);
  EXPECT_FALSE(r->send_snapshot);
  r = map_.Apply(Batch("w1", 1, 9, {}), t0_);
  EXPECT_TRUE(r->send_snapshot);
  EXPECT_NE(r->reason.find("jumped from 3 to 9"), std::string::npos) << r->reason;
  EXPECT_EQ(map_.counters().sequence_gaps, 1);
  EXPECT_EQ(map_.counters().snapshots, 1);
}

TEST_F(KvMapTest, ANewIncarnationNeverInheritsItsPredecessorsBlocks) {
  const auto a = Prefix("a", 3);
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(a)}), t0_).ok());
  const auto changes = map_.Register(Worker("w1", 2), t0_);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].kind, MembershipChange::Kind::kLeft);
  EXPECT_EQ((*changes)[1].kind, MembershipChange::Kind::kJoined);
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w1"), 0);
  EXPECT_EQ(map_.index().EntryCount(), 0);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

// A second live worker claiming an id at another address is refused, naming
// both, and the first keeps the id and its blocks; once the first falls
// silent past the deadline, a worker at a new address (a restart that moved)
// takes the id.
TEST_F(KvMapTest, ASecondLiveWorkerWithAnIdInUseIsRefused) {
  const auto a = Prefix("a", 3);
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(a)}), t0_ + milliseconds(50)).ok());
  WorkerDescriptor twin = Worker("w1", 2);
  twin.endpoint = "elsewhere:2";
  const auto refused = map_.Register(twin, t0_ + milliseconds(120));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("w1:1"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("elsewhere:2"), std::string::npos) << refused.status();
  ASSERT_EQ(map_.List("").size(), 1u);
  EXPECT_EQ(map_.List("")[0].descriptor.endpoint, "w1:1");
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w1"), 3);
  EXPECT_TRUE(map_.Apply(Batch("w1", 1, 2, {}), t0_ + milliseconds(140)).ok()) << "the first keeps publishing";
  // Silent past the deadline: the id is free for the worker at the new address.
  const auto moved = map_.Register(twin, t0_ + milliseconds(250));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(map_.List("")[0].descriptor.endpoint, "elsewhere:2");
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w1"), 0);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

TEST_F(KvMapTest, SilentWorkersAreSweptAndTheirSlotsComeBackEmpty) {
  const auto a = Prefix("a", 3);
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  ASSERT_TRUE(map_.Register(Worker("w2", 1), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(a)}), t0_).ok());
  ASSERT_TRUE(map_.Apply(Batch("w2", 1, 1, {Snapshot({})}), t0_ + milliseconds(80)).ok());
  EXPECT_TRUE(map_.Sweep(t0_ + milliseconds(90)).empty());
  const auto left = map_.Sweep(t0_ + milliseconds(150));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].worker.descriptor.worker_id, "w1");
  EXPECT_EQ(left[0].worker.indexed_blocks, 3);
  ASSERT_TRUE(map_.Register(Worker("w3", 1), t0_ + milliseconds(150)).ok());  // takes w1's old slot
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w3"), 0);
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", a), "w1"), -1);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

TEST_F(KvMapTest, AWorkerIsIndexedUpToTheBlocksItRegisteredAndThenAskedForASnapshot) {
  WorkerDescriptor small = Worker("w1", 1);
  small.capacity_blocks = 5;
  ASSERT_TRUE(map_.Register(small, t0_).ok());
  const auto a = Prefix("a", 4), b = Prefix("b", 4);
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(a)}), t0_).ok());
  // Re-storing what it holds takes no room; two new blocks leave room for one.
  auto r = map_.Apply(Batch("w1", 1, 2, {Stored(a), Stored({b[0], b[1]})}), t0_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(map_.List("m")[0].indexed_blocks, 5);
  EXPECT_EQ(map_.counters().over_capacity_hashes, 1);
  EXPECT_TRUE(r->send_snapshot) << "a worker reporting more than it can hold is out of step";
  EXPECT_NE(r->reason.find("5"), std::string::npos) << r->reason;
  EXPECT_EQ(MatchedFor(map_.FindOverlaps("m", b), "w1"), 1);
  // A snapshot over the capacity is cut to it, and asks for no second one at once.
  std::vector<BlockHash> both = a;
  both.insert(both.end(), b.begin(), b.end());
  r = map_.Apply(Batch("w1", 1, 3, {Snapshot(both)}), t0_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(map_.List("m")[0].indexed_blocks, 5);
  EXPECT_EQ(map_.counters().over_capacity_hashes, 4);
  EXPECT_FALSE(r->send_snapshot);
  // A snapshot that fits puts it back in step.
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 4, {Snapshot(b)}), t0_).ok());
  EXPECT_EQ(map_.List("m")[0].indexed_blocks, 4);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

TEST_F(KvMapTest, AWorkerWithoutACapacityIsBoundedByTheMapsLimit) {
  KvMap map({.liveness_deadline = milliseconds(100), .blocks_without_capacity = 3});
  WorkerDescriptor w = Worker("w1", 1);
  w.capacity_blocks = 0;
  ASSERT_TRUE(map.Register(w, t0_).ok());
  ASSERT_TRUE(map.Apply(Batch("w1", 1, 1, {Snapshot(Prefix("a", 10))}), t0_).ok());
  EXPECT_EQ(map.List("m")[0].indexed_blocks, 3);
  EXPECT_EQ(map.counters().over_capacity_hashes, 7);
}

TEST_F(KvMapTest, LoadReportsUpdateTheTableAndDrainingIsAMembershipChange) {
  ASSERT_TRUE(map_.Register(Worker("w1", 1), t0_).ok());
  KvEventBatch b = Batch("w1", 1, 1, {Snapshot({})});
  b.load = WorkerLoad{.running = 3, .waiting = 1, .blocks_used = 10, .blocks_free = 90, .blocks_total = 100};
  auto r = map_.Apply(b, t0_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->changes.empty());
  EXPECT_EQ(map_.List("m")[0].load.running, 3);
  b = Batch("w1", 1, 2, {});
  b.load = WorkerLoad{.draining = true};
  r = map_.Apply(b, t0_);
  ASSERT_EQ(r->changes.size(), 1u);
  EXPECT_EQ(r->changes[0].kind, MembershipChange::Kind::kDraining);
}

// Lower tiers: moves keep a block indexed, FindOverlaps says where, and the
// worker's bound grows by the capacity its tiers registered.
TEST_F(KvMapTest, TierMovesAreIndexedWithinTheCapacityOfEveryTier) {
  WorkerDescriptor w = Worker("w1", 1);
  w.capacity_blocks = 4;
  w.host_capacity_blocks = 4;
  ASSERT_TRUE(map_.Register(w, t0_).ok());
  const auto a = Prefix("a", 8);
  ASSERT_TRUE(map_.Apply(Batch("w1", 1, 1, {Snapshot(std::vector<BlockHash>(a.begin(), a.begin() + 4))}), t0_).ok());
  KvEventRecord moved{.kind = KvEventRecord::Kind::kStored, .hashes = {a[0], a[1]}, .tier = KvTier::kHost};
  KvEventRecord more{.kind = KvEventRecord::Kind::kStored, .hashes = {a[4], a[5], a[6], a[7]}};
  auto r = map_.Apply(Batch("w1", 1, 2, {moved, more}), t0_);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->send_snapshot) << "8 blocks fit 4 on the device and 4 in host memory";
  const std::vector<WorkerOverlapInfo> o = map_.FindOverlaps("m", a);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].matched_blocks, 8);
  EXPECT_EQ(o[0].host_blocks, 2);
  EXPECT_EQ(o[0].disk_blocks, 0);
  EXPECT_EQ(map_.List("m")[0].indexed_blocks, 8);
  EXPECT_EQ(map_.List("m")[0].indexed_host_blocks, 2);
  EXPECT_EQ(map_.List("m")[0].indexed_disk_blocks, 0);
  EXPECT_TRUE(map_.CheckInvariants().ok());
}

}  // namespace
}  // namespace kvfleet::cachemanager
