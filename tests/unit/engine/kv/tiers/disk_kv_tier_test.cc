#include "engine/kv/tiers/disk_kv_tier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/kv/tiers/kv_block_file.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::engine {
namespace {

constexpr int64_t kBlockBytes = 256;
constexpr char kIdentity[] = "tiny|cpu/1|block_size=4|block_bytes=256";

BlockHash H(uint64_t i) { return {.hi = i, .lo = ~i}; }

std::vector<uint8_t> Bytes(uint8_t seed) {
  std::vector<uint8_t> b(kBlockBytes);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed * 7 + i);
  return b;
}

class DiskKvTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskKvTier> Open(int64_t capacity_blocks = 16, std::string identity = kIdentity) {
    const int64_t file = static_cast<int64_t>(KvBlockHeaderBytes(identity)) + kBlockBytes;
    auto tier = DiskKvTier::Open({.dir = dir_.Path("kv"),
                                  .identity = identity,
                                  .block_bytes = kBlockBytes,
                                  .capacity_bytes = capacity_blocks * file});
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(*tier) : nullptr;
  }

  // Reads `hashes` as one job and waits for it.
  static DiskKvTier::ReadResult ReadAll(DiskKvTier& tier, std::vector<BlockHash> hashes) {
    tier.Read(7, std::move(hashes));
    tier.Flush();
    DiskKvTier::Completions c = tier.TakeCompletions();
    EXPECT_EQ(c.reads.size(), 1u);
    return c.reads.empty() ? DiskKvTier::ReadResult{} : std::move(c.reads[0]);
  }

  std::string FileOf(const BlockHash& h) { return dir_.Path("kv/" + KvBlockFileName(h)); }

  kvfleet::testing::TempDir dir_;
};

TEST_F(DiskKvTierTest, WritesReadBackInOrderAndSurviveARestartWithParents) {
  {
    auto tier = Open();
    std::vector<DiskKvTier::Entry> evicted;
    for (uint64_t i = 1; i <= 3; ++i) {
      ASSERT_TRUE(tier->Write(H(i), i == 1 ? std::nullopt : std::optional<BlockHash>(H(i - 1)), Bytes(i), &evicted));
    }
    EXPECT_TRUE(evicted.empty());
    EXPECT_EQ(tier->startup_read_seconds(), 0.0) << "nothing to adopt, nothing timed";
    EXPECT_FALSE(tier->Write(H(1), std::nullopt, Bytes(1), &evicted)) << "a block already held is not written again";
    DiskKvTier::ReadResult r = ReadAll(*tier, {H(1), H(2), H(3)});
    EXPECT_TRUE(r.error.ok()) << r.error;
    ASSERT_EQ(r.blocks.size(), 3u);
    for (uint64_t i = 1; i <= 3; ++i) EXPECT_EQ(r.blocks[i - 1], Bytes(i));
  }  // the destructor finishes the writes
  auto again = Open();
  EXPECT_EQ(again->num_blocks(), 3);
  EXPECT_GT(again->startup_read_seconds(), 0.0) << "an adopted block's read is timed";
  EXPECT_TRUE(again->Contains(H(2)));
  EXPECT_EQ(again->ParentOf(H(2)), H(1));
  DiskKvTier::ReadResult r = ReadAll(*again, {H(1), H(2), H(3)});
  ASSERT_EQ(r.blocks.size(), 3u);
  EXPECT_EQ(r.blocks[2], Bytes(3));
}

// A window page (unpublished: never announced) stays one across a restart.
TEST_F(DiskKvTierTest, UnpublishedPagesStayUnpublishedAfterARestart) {
  {
    auto tier = Open();
    std::vector<DiskKvTier::Entry> evicted;
    ASSERT_TRUE(tier->Write(H(1), std::nullopt, Bytes(1), &evicted));
    ASSERT_TRUE(tier->Write(H(2), H(1), Bytes(2), &evicted, /*published=*/false));
    EXPECT_TRUE(tier->IsPublished(H(1)));
    EXPECT_FALSE(tier->IsPublished(H(2)));
  }
  auto again = Open();
  ASSERT_EQ(again->num_blocks(), 2);
  EXPECT_TRUE(again->IsPublished(H(1)));
  EXPECT_FALSE(again->IsPublished(H(2)));
  int unpublished = 0;
  for (const DiskKvTier::Entry& e : again->Entries()) unpublished += e.published ? 0 : 1;
  EXPECT_EQ(unpublished, 1);
  DiskKvTier::ReadResult r = ReadAll(*again, {H(2)});
  ASSERT_EQ(r.blocks.size(), 1u);
  EXPECT_EQ(r.blocks[0], Bytes(2));
}

TEST_F(DiskKvTierTest, ADamagedFileEndsTheJobThereAndForeignFilesAreIgnored) {
  {
    auto tier = Open();
    std::vector<DiskKvTier::Entry> evicted;
    for (uint64_t i = 1; i <= 3; ++i) tier->Write(H(i), std::nullopt, Bytes(i), &evicted);
  }
  {
    std::fstream f(FileOf(H(2)), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x5a');
  }
  auto tier = Open();
  DiskKvTier::ReadResult r = ReadAll(*tier, {H(1), H(2), H(3)});
  EXPECT_EQ(r.blocks.size(), 1u);
  EXPECT_TRUE(absl::IsDataLoss(r.error)) << r.error;
  tier->Forget(H(2));
  tier->Flush();
  EXPECT_FALSE(std::filesystem::exists(FileOf(H(2))));
  tier.reset();
  // Another model's identity adopts none of them (and deletes none).
  auto foreign = Open(16, "other|cpu/1|block_size=4|block_bytes=256");
  EXPECT_EQ(foreign->num_blocks(), 0);
  EXPECT_TRUE(std::filesystem::exists(FileOf(H(1))));
}

TEST_F(DiskKvTierTest, ATruncatedFileOrAMissingOneIsAMiss) {
  auto tier = Open();
  std::vector<DiskKvTier::Entry> evicted;
  tier->Write(H(1), std::nullopt, Bytes(1), &evicted);
  tier->Write(H(2), H(1), Bytes(2), &evicted);
  tier->Flush();
  std::filesystem::resize_file(FileOf(H(1)), 100);
  DiskKvTier::ReadResult r = ReadAll(*tier, {H(1), H(2)});
  EXPECT_TRUE(r.blocks.empty());
  EXPECT_TRUE(absl::IsDataLoss(r.error)) << r.error;
  std::filesystem::remove(FileOf(H(2)));
  r = ReadAll(*tier, {H(2)});
  EXPECT_TRUE(absl::IsNotFound(r.error)) << r.error;
}

TEST_F(DiskKvTierTest, CapacityEvictsTheLeastRecentlyUsedAndDeletesItsFile) {
  auto tier = Open(/*capacity_blocks=*/2);
  std::vector<DiskKvTier::Entry> evicted;
  tier->Write(H(1), std::nullopt, Bytes(1), &evicted);
  tier->Write(H(2), H(1), Bytes(2), &evicted);
  ReadAll(*tier, {H(1)});  // 2 is now the least recently used
  tier->Write(H(3), H(2), Bytes(3), &evicted);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].hash, H(2));
  tier->Flush();
  EXPECT_FALSE(std::filesystem::exists(FileOf(H(2))));
  EXPECT_TRUE(std::filesystem::exists(FileOf(H(3))));
  EXPECT_EQ(tier->num_blocks(), 2);
}

TEST_F(DiskKvTierTest, AFailedWriteMakesItReadOnlyAndReportsTheBlock) {
  auto tier = Open();
  std::vector<DiskKvTier::Entry> evicted;
  tier->Write(H(1), std::nullopt, Bytes(1), &evicted);
  tier->Flush();
  std::filesystem::remove_all(dir_.Path("kv"));  // the volume went away
  tier->Write(H(2), H(1), Bytes(2), &evicted, /*published=*/false);
  tier->Flush();
  DiskKvTier::Completions c = tier->TakeCompletions();
  ASSERT_EQ(c.failed_writes.size(), 1u);
  EXPECT_EQ(c.failed_writes[0].hash, H(2));
  EXPECT_EQ(c.failed_writes[0].parent, H(1));
  EXPECT_FALSE(c.failed_writes[0].published) << "a window page's failure is never announced";
  EXPECT_FALSE(tier->writable());
  EXPECT_FALSE(tier->Contains(H(2)));
  EXPECT_FALSE(tier->Write(H(3), std::nullopt, Bytes(3), &evicted));
}

TEST_F(DiskKvTierTest, AFullWriteQueueDropsTheBlockInsteadOfGrowing) {
  auto tier = DiskKvTier::Open({.dir = dir_.Path("kv"),
                                .identity = kIdentity,
                                .block_bytes = kBlockBytes,
                                .capacity_bytes = int64_t{1} << 20,
                                .max_queued_writes = 0});
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::vector<DiskKvTier::Entry> evicted;
  EXPECT_FALSE((*tier)->Write(H(1), std::nullopt, Bytes(1), &evicted));
  EXPECT_FALSE((*tier)->Contains(H(1)));
  EXPECT_TRUE((*tier)->writable()) << "a full queue is not a failed disk";
}

TEST_F(DiskKvTierTest, OpenRefusesACapacityUnderOneBlockAndRemovesTemporaryFiles) {
  auto none = DiskKvTier::Open(
      {.dir = dir_.Path("kv"), .identity = kIdentity, .block_bytes = kBlockBytes, .capacity_bytes = 10});
  EXPECT_TRUE(absl::IsInvalidArgument(none.status())) << none.status();
  std::filesystem::create_directories(dir_.Path("kv"));
  std::ofstream(dir_.Path("kv/abc.kvblock.tmp")) << "half";
  auto tier = Open();
  EXPECT_FALSE(std::filesystem::exists(dir_.Path("kv/abc.kvblock.tmp")));
}

}  // namespace
}  // namespace kvfleet::engine
