#include "engine/kv/transfer/kv_block_stream.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace kvfleet::engine {
namespace {

constexpr uint64_t kBlockBytes = 1000;

class KvBlockStreamTest : public ::testing::Test {
 protected:
  KvBlockStreamTest() {
    for (int b = 0; b < 3; ++b) {
      hashes_.push_back({.hi = 7, .lo = static_cast<uint64_t>(b + 1)});
      blocks_.emplace_back(kBlockBytes);
      std::iota(blocks_.back().begin(), blocks_.back().end(), static_cast<uint8_t>(31 * b));
    }
  }
  std::optional<BlockHash> Parent(int b) const {
    return b == 0 ? std::nullopt : std::optional<BlockHash>(hashes_[b - 1]);
  }
  std::vector<KvBlockChunk> Chunks(int b, uint64_t max) const {
    return SplitKvBlock(hashes_[b], Parent(b), /*published=*/b != 2, blocks_[b], max);
  }

  std::vector<BlockHash> hashes_;
  std::vector<std::vector<uint8_t>> blocks_;
};

TEST_F(KvBlockStreamTest, BlocksArriveAsTheSendersBytesWhateverTheChunkSize) {
  for (uint64_t max : {1u, 7u, 256u, 999u, 1000u, 4096u}) {
    KvBlockAssembler in(hashes_, kBlockBytes);
    for (int b = 0; b < 3; ++b) {
      const std::vector<KvBlockChunk> chunks = Chunks(b, max);
      EXPECT_EQ(chunks.size(), (kBlockBytes + max - 1) / max);
      for (const KvBlockChunk& c : chunks) {
        EXPECT_LE(c.data.size(), max);
        ASSERT_TRUE(in.Add(c).ok()) << "chunk size " << max;
      }
    }
    ASSERT_TRUE(in.Finish().ok());
    const std::vector<KvBlockBytes> got = in.TakeCompleted();
    ASSERT_EQ(got.size(), 3u);
    for (int b = 0; b < 3; ++b) {
      EXPECT_EQ(got[b].hash, hashes_[b]);
      EXPECT_EQ(got[b].parent, Parent(b));
      EXPECT_EQ(got[b].published, b != 2);
      EXPECT_EQ(got[b].bytes, blocks_[b]);
    }
    EXPECT_TRUE(in.TakeCompleted().empty()) << "each block is handed over once";
  }
}

TEST_F(KvBlockStreamTest, ASenderMayStopAfterAnyWholeBlock) {
  KvBlockAssembler in(hashes_, kBlockBytes);
  for (const KvBlockChunk& c : Chunks(0, 300)) ASSERT_TRUE(in.Add(c).ok());
  EXPECT_TRUE(in.Finish().ok());
  EXPECT_EQ(in.blocks_completed(), 1);
  EXPECT_EQ(in.TakeCompleted().size(), 1u);
}

TEST_F(KvBlockStreamTest, AStreamThatEndsInsideABlockIsDataLossAndKeepsTheWholeOnes) {
  KvBlockAssembler in(hashes_, kBlockBytes);
  for (const KvBlockChunk& c : Chunks(0, 300)) ASSERT_TRUE(in.Add(c).ok());
  const std::vector<KvBlockChunk> second = Chunks(1, 300);
  ASSERT_TRUE(in.Add(second[0]).ok());
  const absl::Status s = in.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("after 300 of its 1000 bytes"), std::string::npos) << s;
  EXPECT_EQ(in.TakeCompleted().size(), 1u) << "the whole first block is still good";
}

TEST_F(KvBlockStreamTest, AFlippedBitFailsTheBlockAndEverythingAfter) {
  KvBlockAssembler in(hashes_, kBlockBytes);
  std::vector<KvBlockChunk> chunks = Chunks(0, 400);
  std::vector<uint8_t> damaged(chunks[1].data.begin(), chunks[1].data.end());
  damaged[17] ^= 0x10;
  chunks[1].data = damaged;
  ASSERT_TRUE(in.Add(chunks[0]).ok());
  ASSERT_TRUE(in.Add(chunks[1]).ok()) << "checked once the block is whole";
  const absl::Status s = in.Add(chunks[2]);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s;
  EXPECT_TRUE(in.TakeCompleted().empty()) << "nothing of a damaged block is kept";
  EXPECT_EQ(in.Add(Chunks(1, 400)[0]).code(), absl::StatusCode::kDataLoss) << "a failed stream stays failed";
  EXPECT_EQ(in.Finish().code(), absl::StatusCode::kDataLoss);
}

TEST_F(KvBlockStreamTest, EachBrokenStreamIsRefusedWithItsReason) {
  struct Case {
    std::string name;
    void (*edit)(std::vector<KvBlockChunk>&);
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"a lost chunk", [](std::vector<KvBlockChunk>& c) { c.erase(c.begin() + 1); }, absl::StatusCode::kDataLoss,
       "where byte 250 was due"},
      {"reordered chunks", [](std::vector<KvBlockChunk>& c) { std::swap(c[0], c[1]); }, absl::StatusCode::kDataLoss,
       "a chunk at byte 250 where byte 0 was due"},
      {"a block not asked for", [](std::vector<KvBlockChunk>& c) { c[0].hash.lo = 99; }, absl::StatusCode::kDataLoss,
       "where block 0 of the request"},
      {"another block size", [](std::vector<KvBlockChunk>& c) { c[0].block_bytes = 2000; },
       absl::StatusCode::kFailedPrecondition, "blocks here have 1000"},
      {"a checksum that changes", [](std::vector<KvBlockChunk>& c) { c[1].checksum ^= 1; }, absl::StatusCode::kDataLoss,
       "disagree"},
      {"an empty chunk", [](std::vector<KvBlockChunk>& c) { c[1].data = {}; }, absl::StatusCode::kDataLoss,
       "a chunk of 0 bytes"},
  };
  for (const Case& k : cases) {
    KvBlockAssembler in(hashes_, kBlockBytes);
    std::vector<KvBlockChunk> chunks = Chunks(0, 250);
    k.edit(chunks);
    absl::Status s;
    for (const KvBlockChunk& c : chunks) {
      s = in.Add(c);
      if (!s.ok()) break;
    }
    EXPECT_EQ(s.code(), k.code) << k.name << ": " << s;
    EXPECT_NE(s.message().find(k.says), std::string::npos) << k.name << ": " << s;
    EXPECT_TRUE(in.TakeCompleted().empty()) << k.name;
  }
}

TEST_F(KvBlockStreamTest, MoreBlocksThanAskedAreRefused) {
  KvBlockAssembler in({hashes_[0]}, kBlockBytes);
  for (const KvBlockChunk& c : Chunks(0, 1000)) ASSERT_TRUE(in.Add(c).ok());
  const absl::Status s = in.Add(Chunks(1, 1000)[0]);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("after all 1 blocks asked for"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvfleet::engine
