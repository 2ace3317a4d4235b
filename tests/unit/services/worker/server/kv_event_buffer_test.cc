#include "services/worker/server/kv_event_buffer.h"

#include <gtest/gtest.h>

namespace kvfleet::worker {
namespace {

using std::chrono::milliseconds;
using Kind = PublishedEvent::Kind;

BlockHash H(uint64_t i) { return {.hi = i, .lo = i + 100}; }

class KvEventBufferTest : public ::testing::Test {
 protected:
  KvEventBuffer::Clock::time_point t0_ = KvEventBuffer::Clock::now();
  const milliseconds heartbeat_{1000};
};

TEST_F(KvEventBufferTest, NothingIsKeptBeforeTheSnapshotWhichGoesFirst) {
  KvEventBuffer b;
  b.OnBlockStored(H(1), std::nullopt);  // no session: dropped
  b.Connect(t0_);
  EXPECT_TRUE(b.RequestSnapshot());
  EXPECT_FALSE(b.RequestSnapshot()) << "one awaited already: the engine is not asked twice";
  b.OnBlockStored(H(2), std::nullopt);  // before the snapshot: superseded by it
  b.OnSnapshot(std::vector<engine::CachedBlock>{{.hash = H(7)}, {.hash = H(8), .parent = H(7)}});
  b.OnBlockStored(H(9), std::nullopt);
  std::optional<OutgoingBatch> batch = b.NextBatch(t0_, heartbeat_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->sequence, 1u);
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_EQ(batch->events[0],
            (PublishedEvent{.kind = Kind::kSnapshot, .hashes = {H(7), H(8)}, .parents = {std::nullopt, H(7)}}));
  EXPECT_EQ(batch->events[1].hashes, std::vector<BlockHash>{H(9)});
  // A snapshot nobody asked for is ignored.
  b.OnSnapshot(std::vector<engine::CachedBlock>{{.hash = H(3)}});
  EXPECT_FALSE(b.NextBatch(t0_, heartbeat_).has_value());
}

TEST_F(KvEventBufferTest, ChainsCoalescePerTierAndAClearSupersedesWhatIsPending) {
  KvEventBuffer b;
  b.Connect(t0_);
  b.RequestSnapshot();
  b.OnSnapshot({});
  b.NextBatch(t0_, heartbeat_);
  b.OnBlockStored(H(1), std::nullopt);
  b.OnBlockStored(H(2), H(1));
  b.OnBlockStored(H(3), H(2));
  b.OnBlockMoved(H(1), std::nullopt, KvTier::kHost);
  b.OnBlockMoved(H(2), H(1), KvTier::kHost);
  b.OnBlockMoved(H(3), H(2), KvTier::kDisk);
  b.OnBlockStored(H(5), H(4));  // another chain
  b.OnBlockRemoved(H(8));
  b.OnBlockRemoved(H(9));
  std::optional<OutgoingBatch> batch = b.NextBatch(t0_, heartbeat_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->sequence, 2u);
  const std::vector<PublishedEvent> want = {
      {.kind = Kind::kStored, .hashes = {H(1), H(2), H(3)}},
      {.kind = Kind::kStored, .hashes = {H(1), H(2)}, .tier = KvTier::kHost},
      {.kind = Kind::kStored, .hashes = {H(3)}, .parent = H(2), .tier = KvTier::kDisk},
      {.kind = Kind::kStored, .hashes = {H(5)}, .parent = H(4)},
      {.kind = Kind::kRemoved, .hashes = {H(8), H(9)}},
  };
  EXPECT_EQ(batch->events, want);
  b.OnBlockStored(H(6), std::nullopt);
  b.OnAllCleared();
  batch = b.NextBatch(t0_, heartbeat_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->events, std::vector<PublishedEvent>{{.kind = Kind::kCleared}});
}

TEST_F(KvEventBufferTest, ABatchIsDueForEventsALoadChangeOrAQuietSpell) {
  KvEventBuffer b;
  b.Connect(t0_);
  b.RequestSnapshot();
  // Awaiting the snapshot: only liveness, at the whole heartbeat.
  EXPECT_FALSE(b.NextBatch(t0_ + milliseconds(999), heartbeat_).has_value());
  std::optional<OutgoingBatch> beat = b.NextBatch(t0_ + milliseconds(1000), heartbeat_);
  ASSERT_TRUE(beat.has_value());
  EXPECT_TRUE(beat->events.empty());
  b.NotifyLoadChanged();  // not while awaiting the snapshot
  EXPECT_FALSE(b.NextBatch(t0_ + milliseconds(1001), heartbeat_).has_value());
  b.OnSnapshot({});
  ASSERT_TRUE(b.NextBatch(t0_ + milliseconds(1002), heartbeat_).has_value());
  // Streaming: half the heartbeat, or at once on a load change.
  EXPECT_FALSE(b.NextBatch(t0_ + milliseconds(1501), heartbeat_).has_value());
  EXPECT_TRUE(b.NextBatch(t0_ + milliseconds(1502), heartbeat_).has_value());
  b.NotifyLoadChanged();
  EXPECT_TRUE(b.Wait(milliseconds(0)));
  std::optional<OutgoingBatch> load = b.NextBatch(t0_ + milliseconds(1503), heartbeat_);
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->sequence, 4u);
  EXPECT_FALSE(b.NextBatch(t0_ + milliseconds(1504), heartbeat_).has_value());
  b.Stop();
  EXPECT_FALSE(b.Wait(milliseconds(1000)));
  EXPECT_FALSE(b.Sleep(milliseconds(1000)));
}

TEST_F(KvEventBufferTest, SequencesRestartPerSessionAndTheFaultDropsTheNthBatchWithEvents) {
  KvEventBuffer b(/*fault_drop_event_batch=*/2);
  b.Connect(t0_);
  b.RequestSnapshot();
  b.OnSnapshot({});
  EXPECT_FALSE(b.NextBatch(t0_, heartbeat_)->dropped);  // the snapshot: the first with events
  b.OnBlockRemoved(H(1));
  std::optional<OutgoingBatch> lost = b.NextBatch(t0_, heartbeat_);
  ASSERT_TRUE(lost.has_value());
  EXPECT_TRUE(lost->dropped);
  EXPECT_EQ(lost->sequence, 2u);
  b.OnBlockRemoved(H(2));
  EXPECT_EQ(b.NextBatch(t0_, heartbeat_)->sequence, 3u);
  b.Disconnect();
  b.OnBlockRemoved(H(3));  // between sessions: dropped
  b.Connect(t0_);
  EXPECT_TRUE(b.RequestSnapshot());
  b.OnSnapshot({});
  std::optional<OutgoingBatch> first = b.NextBatch(t0_, heartbeat_);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->sequence, 1u);
  EXPECT_EQ(first->events.size(), 1u);
}

}  // namespace
}  // namespace kvfleet::worker
