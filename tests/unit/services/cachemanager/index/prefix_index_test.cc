// Unit tests of PrefixIndex: each operation, its return values and its edge
// cases (gaps, repeats, unheld removals, slot reuse, empty queries, many
// holders). prefix_index_random_test.cc checks long random event streams
// against a brute-force model.
#include "services/cachemanager/index/prefix_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/block_hash.h"

namespace kvfleet::cachemanager {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kBlockSize = 4;

// The chained hashes of `blocks` full blocks of distinct tokens, as a worker
// and the router would compute them; `seed` picks the tokens.
std::vector<BlockHash> Chain(int blocks, int32_t seed) {
  std::vector<int32_t> tokens;
  for (int64_t t = 0; t < blocks * kBlockSize; ++t) tokens.push_back(seed * 1000 + static_cast<int32_t>(t));
  return HashFullBlocks(RootBlockHash("test-model", ""), tokens, kBlockSize);
}

std::vector<BlockHash> Pick(const std::vector<BlockHash>& chain, std::vector<int> positions) {
  std::vector<BlockHash> out;
  for (int p : positions) out.push_back(chain[p]);
  return out;
}

Overlap O(int32_t worker, int32_t blocks) { return Overlap{WorkerSlot(worker), blocks}; }

TEST(PrefixIndexTest, EmptyIndexAnswersNothing) {
  PrefixIndex index;
  EXPECT_THAT(index.FindOverlaps({}), IsEmpty());
  EXPECT_THAT(index.FindOverlaps(Chain(3, 1)), IsEmpty());
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 0);
  EXPECT_EQ(index.BlockCount(WorkerSlot(500)), 0);
  EXPECT_EQ(index.DistinctHashes(), 0);
  EXPECT_EQ(index.EntryCount(), 0);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, EmptyQueryFindsNothingInAFullIndex) {
  PrefixIndex index;
  index.Store(WorkerSlot(0), Chain(4, 1));
  EXPECT_THAT(index.FindOverlaps({}), IsEmpty());
}

TEST(PrefixIndexTest, CountsLeadingBlocksOfTheQuery) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(6, 1);
  EXPECT_EQ(index.Store(WorkerSlot(0), std::span(chain).first(4)), 4);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4)));
  EXPECT_THAT(index.FindOverlaps(std::span(chain).first(2)), ElementsAre(O(0, 2)));
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 4);
  EXPECT_TRUE(index.Holds(WorkerSlot(0), chain[3]));
  EXPECT_FALSE(index.Holds(WorkerSlot(0), chain[4]));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, WholeQueryHeldMatchesItsLength) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(5, 1);
  index.Store(WorkerSlot(2), chain);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(2, 5)));
}

TEST(PrefixIndexTest, GapEndsTheCount) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(5, 1);
  index.Store(WorkerSlot(0), Pick(chain, {0, 1, 3, 4}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 2)));
}

TEST(PrefixIndexTest, WorkerWithoutTheFirstBlockIsLeftOut) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(5, 1);
  index.Store(WorkerSlot(0), Pick(chain, {1, 2, 3, 4}));
  index.Store(WorkerSlot(1), Pick(chain, {0}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(1, 1)));
}

TEST(PrefixIndexTest, OtherPromptsDoNotMatch) {
  PrefixIndex index;
  index.Store(WorkerSlot(0), Chain(5, 1));
  EXPECT_THAT(index.FindOverlaps(Chain(5, 2)), IsEmpty());
}

TEST(PrefixIndexTest, EachWorkerGetsItsOwnDepthInSlotOrder) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(8, 1);
  index.Store(WorkerSlot(5), std::span(chain).first(8));
  index.Store(WorkerSlot(1), std::span(chain).first(3));
  index.Store(WorkerSlot(3), std::span(chain).first(1));
  index.Store(WorkerSlot(0), Chain(8, 2));  // another prompt
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(1, 3), O(3, 1), O(5, 8)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, StoreIsIdempotentPerWorkerAndHash) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 1);
  EXPECT_EQ(index.Store(WorkerSlot(0), chain), 3);
  EXPECT_EQ(index.Store(WorkerSlot(0), chain), 0);
  EXPECT_EQ(index.Store(WorkerSlot(0), Pick(chain, {2, 2, 1})), 0);
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 3);
  EXPECT_EQ(index.EntryCount(), 3);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 3)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, RepeatsWithinOneStoreCountOnce) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(2, 1);
  EXPECT_EQ(index.Store(WorkerSlot(0), Pick(chain, {0, 0, 1, 0})), 2);
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 2);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, SharedHashIsOneEntryWithManyHolders) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), chain);
  EXPECT_EQ(index.DistinctHashes(), 4);
  EXPECT_EQ(index.EntryCount(), 8);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4), O(1, 4)));
}

TEST(PrefixIndexTest, RemoveIgnoresHashesTheWorkerDoesNotHold) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), std::span(chain).first(2));
  EXPECT_EQ(index.Remove(WorkerSlot(1), Pick(chain, {2, 3})), 0);  // held by 0, not by 1
  EXPECT_EQ(index.Remove(WorkerSlot(0), Chain(2, 9)), 0);          // held by nobody
  EXPECT_EQ(index.Remove(WorkerSlot(7), chain), 0);                // a slot never used
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4), O(1, 2)));
  EXPECT_EQ(index.EntryCount(), 6);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, RemoveOneHolderKeepsTheOthers) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), chain);
  EXPECT_EQ(index.Remove(WorkerSlot(0), Pick(chain, {1})), 1);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 1), O(1, 4)));
  EXPECT_EQ(index.DistinctHashes(), 4);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, RemovingTheLastHolderErasesTheHash) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  EXPECT_EQ(index.Remove(WorkerSlot(0), Pick(chain, {3, 2, 3})), 2);
  EXPECT_EQ(index.DistinctHashes(), 2);
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 2);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 2)));
  EXPECT_EQ(index.Remove(WorkerSlot(0), chain), 2);
  EXPECT_EQ(index.DistinctHashes(), 0);
  EXPECT_EQ(index.EntryCount(), 0);
  EXPECT_THAT(index.FindOverlaps(chain), IsEmpty());
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, ClearDropsOnlyThatWorker) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), std::span(chain).first(2));
  index.Store(WorkerSlot(1), Chain(3, 2));
  EXPECT_EQ(index.Clear(WorkerSlot(1)), 5);
  EXPECT_EQ(index.BlockCount(WorkerSlot(1)), 0);
  EXPECT_EQ(index.DistinctHashes(), 4);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4)));
  EXPECT_THAT(index.FindOverlaps(Chain(3, 2)), IsEmpty());
  EXPECT_EQ(index.Clear(WorkerSlot(1)), 0);
  EXPECT_EQ(index.Clear(WorkerSlot(9)), 0);  // never used
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, SlotReusedAfterClearStartsEmpty) {
  PrefixIndex index;
  const std::vector<BlockHash> old_chain = Chain(4, 1);
  const std::vector<BlockHash> new_chain = Chain(4, 2);
  index.Store(WorkerSlot(3), old_chain);
  index.Clear(WorkerSlot(3));  // the worker died; the registry hands slot 3 to a new one
  index.Store(WorkerSlot(3), std::span(new_chain).first(2));
  EXPECT_THAT(index.FindOverlaps(old_chain), IsEmpty());
  EXPECT_THAT(index.FindOverlaps(new_chain), ElementsAre(O(3, 2)));
  EXPECT_EQ(index.BlockCount(WorkerSlot(3)), 2);
  EXPECT_EQ(index.EntryCount(), 2);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, ReplaceAllKeepsTheCommonPartAndSwapsTheRest) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(6, 1);
  index.Store(WorkerSlot(0), std::span(chain).first(4));
  index.Store(WorkerSlot(1), chain);
  // Snapshot: blocks 2..5 (with a repeat), no longer 0 and 1.
  index.ReplaceAll(WorkerSlot(0), Pick(chain, {5, 2, 3, 4, 2}));
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 4);
  EXPECT_FALSE(index.Holds(WorkerSlot(0), chain[0]));
  EXPECT_TRUE(index.Holds(WorkerSlot(0), chain[5]));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(1, 6)));
  EXPECT_THAT(index.FindOverlaps(std::span(chain).subspan(2)), ElementsAre(O(0, 4), O(1, 4)));
  EXPECT_EQ(index.EntryCount(), 10);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, ReplaceAllOfNothingClears) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 1);
  index.Store(WorkerSlot(0), chain);
  index.ReplaceAll(WorkerSlot(0), {});
  EXPECT_EQ(index.BlockCount(WorkerSlot(0)), 0);
  EXPECT_EQ(index.DistinctHashes(), 0);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, ReplaceAllOnANewSlotStores) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 1);
  index.ReplaceAll(WorkerSlot(4), chain);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(4, 3)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

// Many holders of a later block but few workers still matching: the walk
// binary-searches the holders instead of merging with all of them.
TEST(PrefixIndexTest, FewMatchingWorkersAmongManyHolders) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(4, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), Pick(chain, {0}));
  for (int32_t w = 2; w < 40; ++w) index.Store(WorkerSlot(w), Pick(chain, {1, 2, 3}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4), O(1, 1)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

// The next block has as many holders as there are matching workers, but not
// the same ones: the walk must not take them for the same set.
TEST(PrefixIndexTest, SameNumberOfOtherHolders) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), Pick(chain, {0}));
  index.Store(WorkerSlot(2), Pick(chain, {1, 2}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 3), O(1, 1)));
}

// Holder lists stay sorted whatever the order workers store in.
TEST(PrefixIndexTest, SlotsStoredInAnyOrder) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(6, 1);
  for (int32_t w : {150, 3, 77, 0, 64, 12}) index.Store(WorkerSlot(w), std::span(chain).first(1 + w % 6));
  index.Remove(WorkerSlot(77), Pick(chain, {0}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 1), O(3, 4), O(12, 1), O(64, 5), O(150, 1)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, ManySlots) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(6, 1);
  for (int32_t w = 0; w < 200; w += 7) index.Store(WorkerSlot(w), std::span(chain).first(1 + w % 6));
  std::vector<Overlap> expected;
  for (int32_t w = 0; w < 200; w += 7) expected.push_back(O(w, 1 + w % 6));
  EXPECT_EQ(index.FindOverlaps(chain), expected);
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(PrefixIndexTest, MovedIndexKeepsItsContents) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 1);
  index.Store(WorkerSlot(1), chain);
  PrefixIndex moved = std::move(index);
  EXPECT_THAT(moved.FindOverlaps(chain), ElementsAre(O(1, 3)));
  EXPECT_EQ(moved.EntryCount(), 3);
}

TEST(PrefixIndexDeathTest, BadSlotIsABug) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(1, 1);
  EXPECT_DEATH(index.Store(WorkerSlot(-1), chain), "worker slot");
  EXPECT_DEATH(index.Store(WorkerSlot(PrefixIndex::kMaxWorkerSlots), chain), "worker slot");
  EXPECT_DEATH(index.BlockCount(WorkerSlot(-2)), "worker slot");
}

// A block stored again in a lower tier moved there: the walk counts it as
// held, and says how many of the leading blocks sit below the device.
TEST(PrefixIndexTest, LowerTierBlocksCountAsHeldAndAreReportedByTier) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(8, 1);
  index.Store(WorkerSlot(0), chain);
  index.Store(WorkerSlot(1), std::span(chain).first(6));
  index.Store(WorkerSlot(0), Pick(chain, {1, 2}), KvTier::kHost);
  index.Store(WorkerSlot(0), Pick(chain, {5}), KvTier::kDisk);
  EXPECT_EQ(index.TierOf(WorkerSlot(0), chain[1]), KvTier::kHost);
  EXPECT_EQ(index.TierOf(WorkerSlot(0), chain[5]), KvTier::kDisk);
  EXPECT_EQ(index.TierOf(WorkerSlot(1), chain[1]), KvTier::kDevice);
  EXPECT_EQ(index.EntryCount(), 14) << "a move adds no pair";
  EXPECT_EQ(index.LowerBlockCount(WorkerSlot(0), KvTier::kHost), 2);
  EXPECT_EQ(index.LowerBlockCount(WorkerSlot(0), KvTier::kDisk), 1);
  EXPECT_EQ(index.LowerBlockCount(WorkerSlot(1), KvTier::kHost), 0);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 8, 2, 1}, O(1, 6)));
  // Back on the device (a reload), then removed from every tier.
  index.Store(WorkerSlot(0), Pick(chain, {1}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 8, 1, 1}, O(1, 6)));
  index.Remove(WorkerSlot(0), Pick(chain, {2}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 2), O(1, 6)));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  // A snapshot lists the device: the lower tiers' blocks come after it.
  index.ReplaceAll(WorkerSlot(0), std::span(chain).first(4));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 4), O(1, 6)));
  index.Store(WorkerSlot(0), Pick(chain, {4, 5, 6}), KvTier::kDisk);
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 7, 0, 3}, O(1, 6)));
  index.Clear(WorkerSlot(0));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(1, 6)));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

}  // namespace
}  // namespace kvfleet::cachemanager

namespace kvfleet::cachemanager {
namespace {

// A 200-block chain held whole by one worker, its tiers in stretches, and a
// block back on the device inside a host stretch (a drop at its parent):
// bisection must find every stretch, the single block included.
TEST(PrefixIndexTest, BisectsAWholeChainWithTierStretchesAndADrop) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(200, 7);
  const std::span<const BlockHash> all(chain);
  index.Store(WorkerSlot(0), all, KvTier::kDevice, ChainParent::Root());
  index.Store(WorkerSlot(0), all.subspan(80, 60), KvTier::kHost, ChainParent::Of(chain[79]));
  index.Store(WorkerSlot(0), all.subspan(140), KvTier::kDisk, ChainParent::Of(chain[139]));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 200, 60, 60}));
  index.Store(WorkerSlot(0), all.subspan(111, 1), KvTier::kDevice, ChainParent::Of(chain[110]));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 200, 59, 60}));
  // A second worker holding the first 150, all on its device.
  index.Store(WorkerSlot(1), all.first(150), KvTier::kDevice, ChainParent::Root());
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(Overlap{WorkerSlot(0), 200, 59, 60}, O(1, 150)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

// Chains broken or unknown: the answer stays exact (the walk serves it).
TEST(PrefixIndexTest, BrokenOrUnknownChainsStillCountExactly) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(100, 8);
  index.Store(WorkerSlot(0), chain, KvTier::kDevice, ChainParent::Root());
  index.Remove(WorkerSlot(0), Pick(chain, {40}));  // a hole: 41..99 lost their chain
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 40)));
  index.Store(WorkerSlot(0), Pick(chain, {40}), KvTier::kDevice, ChainParent::Of(chain[39]));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 100)));  // mended
  index.Store(WorkerSlot(1), std::span(chain).subspan(1, 60));     // no parent said, no chain start
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 100)));
  index.Store(WorkerSlot(1), Pick(chain, {0}));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 100), O(1, 61)));
  // A snapshot keeps what the worker's blocks knew of their parents.
  index.ReplaceAll(WorkerSlot(0), std::span(chain).first(90));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 90), O(1, 61)));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

// A snapshot that names its blocks' parents gives the index whole chains
// at once, in any order of the blocks, so the prompts it holds are bisected;
// one without parents leaves new blocks unplaced until they go.
TEST(PrefixIndexTest, ASnapshotWithParentsKnowsItsChainsWhole) {
  const std::vector<BlockHash> chain = Chain(60, 13);
  const std::vector<BlockHash> other = Chain(5, 14);
  std::vector<BlockHash> hashes;
  std::vector<ChainParent> parents;
  for (const std::vector<BlockHash>* c : {&chain, &other}) {
    for (size_t i = 0; i < c->size(); ++i) {
      hashes.push_back((*c)[i]);
      parents.push_back(i == 0 ? ChainParent::Root() : ChainParent::Of((*c)[i - 1]));
    }
  }
  // Children before their parents: depths cannot be read off in order.
  std::reverse(hashes.begin(), hashes.end());
  std::reverse(parents.begin(), parents.end());
  PrefixIndex with;
  with.ReplaceAll(WorkerSlot(0), hashes, parents);
  EXPECT_TRUE(with.ChainsWhole(WorkerSlot(0)));
  EXPECT_EQ(with.WorkersWithBrokenChains(), 0);
  EXPECT_THAT(with.FindOverlaps(chain), ElementsAre(O(0, 60)));
  EXPECT_TRUE(with.CheckInvariants().ok()) << with.CheckInvariants();
  PrefixIndex without;
  without.ReplaceAll(WorkerSlot(0), hashes);
  EXPECT_FALSE(without.ChainsWhole(WorkerSlot(0)));
  EXPECT_EQ(without.WorkersWithBrokenChains(), 1);
  EXPECT_THAT(without.FindOverlaps(chain), ElementsAre(O(0, 60)));  // walked, still exact
  // A snapshot that names parents replaces what the index knew.
  without.ReplaceAll(WorkerSlot(0), hashes, parents);
  EXPECT_TRUE(without.ChainsWhole(WorkerSlot(0)));
  EXPECT_TRUE(without.CheckInvariants().ok()) << without.CheckInvariants();
}

// Parents the snapshot does not hold, false parents that loop, and a block
// named its own parent leave those blocks unplaced, and the rest whole.
TEST(PrefixIndexTest, ASnapshotsMissingOrLoopingParentsAreUnplaced) {
  const std::vector<BlockHash> chain = Chain(6, 15);
  PrefixIndex index;
  // chain[1..5] without chain[0]: its child has no held parent.
  index.ReplaceAll(
      WorkerSlot(0), std::span(chain).subspan(1),
      std::vector<ChainParent>{ChainParent::Of(chain[0]), ChainParent::Of(chain[1]), ChainParent::Of(chain[2]),
                               ChainParent::Of(chain[3]), ChainParent::Of(chain[4])});
  EXPECT_FALSE(index.ChainsWhole(WorkerSlot(0)));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  // A loop (0 -> 1 -> 0) and a self-parent, beside a whole chain.
  const std::vector<BlockHash> whole = Chain(3, 16);
  index.ReplaceAll(
      WorkerSlot(1), std::vector<BlockHash>{chain[0], chain[1], chain[2], whole[0], whole[1], whole[2]},
      std::vector<ChainParent>{ChainParent::Of(chain[1]), ChainParent::Of(chain[0]), ChainParent::Of(chain[2]),
                               ChainParent::Root(), ChainParent::Of(whole[0]), ChainParent::Of(whole[1])});
  EXPECT_FALSE(index.ChainsWhole(WorkerSlot(1)));
  EXPECT_THAT(index.FindOverlaps(whole), ElementsAre(O(1, 3)));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(1, 3)));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  // Once the looping blocks go, the worker's chains are whole again.
  index.Remove(WorkerSlot(1), Pick(chain, {0, 1, 2}));
  EXPECT_TRUE(index.ChainsWhole(WorkerSlot(1)));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

// A worker that names false parents shifts only its own depths: another
// worker's drop is still found where the prompt has it.
TEST(PrefixIndexTest, FalseParentsMisleadOnlyTheirWorker) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(3, 9);
  const std::vector<BlockHash> other = Chain(1, 10);
  index.Store(WorkerSlot(0), other, KvTier::kDevice, ChainParent::Root());
  index.Store(WorkerSlot(0), chain, KvTier::kDevice, ChainParent::Of(other[0]));  // a lie: depths 1..3
  index.Store(WorkerSlot(1), Pick(chain, {0}), KvTier::kDevice, ChainParent::Root());
  index.Store(WorkerSlot(1), Pick(chain, {1}), KvTier::kHost, ChainParent::Of(chain[0]));
  index.Store(WorkerSlot(1), Pick(chain, {2}), KvTier::kDevice, ChainParent::Of(chain[1]));
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 3), Overlap{WorkerSlot(1), 3, 1, 0}));
  EXPECT_TRUE(index.CheckInvariants().ok());
}

// A block stored again under another parent adopts children whose depths
// no longer step by one: a worker contradicting itself, not a broken index.
TEST(PrefixIndexTest, ABlockStoredUnderAnotherParentKeepsTheIndexConsistent) {
  PrefixIndex index;
  const std::vector<BlockHash> chain = Chain(2, 11);
  const std::vector<BlockHash> other = Chain(1, 12);
  index.Store(WorkerSlot(0), other, KvTier::kDevice, ChainParent::Root());
  index.Store(WorkerSlot(0), chain, KvTier::kDevice, ChainParent::Root());
  index.Remove(WorkerSlot(0), Pick(chain, {0}));
  index.Store(WorkerSlot(0), Pick(chain, {0}), KvTier::kDevice, ChainParent::Of(other[0]));
  const absl::Status invariants = index.CheckInvariants();
  EXPECT_TRUE(invariants.ok()) << invariants;
  EXPECT_THAT(index.FindOverlaps(chain), ElementsAre(O(0, 2)));
}

}  // namespace
}  // namespace kvfleet::cachemanager
