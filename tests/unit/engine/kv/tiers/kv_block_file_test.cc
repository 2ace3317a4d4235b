#include "engine/kv/tiers/kv_block_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <numeric>

namespace kvfleet::engine {
namespace {

constexpr char kIdentity[] = "SmolLM2|cpu/1|block_size=16|block_bytes=64";

class KvBlockFileTest : public ::testing::Test {
 protected:
  KvBlockFileTest() : payload_(64) { std::iota(payload_.begin(), payload_.end(), 3); }
  const BlockHash hash_{.hi = 0x1234, .lo = 0x5678};
  const BlockHash parent_{.hi = 0x9, .lo = 0x10};
  std::vector<uint8_t> payload_;
};

TEST_F(KvBlockFileTest, RoundTripsPayloadHashAndParent) {
  const std::vector<uint8_t> file = EncodeKvBlockFile(kIdentity, hash_, parent_, payload_);
  EXPECT_EQ(file.size(), KvBlockHeaderBytes(kIdentity) + payload_.size());
  auto header = DecodeKvBlockHeader(kIdentity, file);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->hash, hash_);
  EXPECT_EQ(header->parent, parent_);
  EXPECT_EQ(header->payload_bytes, 64u);
  EXPECT_TRUE(header->published);
  auto payload = DecodeKvBlockFile(kIdentity, hash_, 64, file);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(std::vector<uint8_t>(payload->begin(), payload->end()), payload_);
  // A first block has no parent.
  auto root = DecodeKvBlockHeader(kIdentity, EncodeKvBlockFile(kIdentity, hash_, std::nullopt, payload_));
  ASSERT_TRUE(root.ok());
  EXPECT_FALSE(root->parent.has_value());
  // A window page says it is unpublished, with or without a parent.
  for (const std::optional<BlockHash>& parent : {std::optional<BlockHash>(parent_), std::optional<BlockHash>()}) {
    auto page = DecodeKvBlockHeader(kIdentity, EncodeKvBlockFile(kIdentity, hash_, parent, payload_, false));
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_FALSE(page->published);
    EXPECT_EQ(page->parent, parent);
  }
}

TEST_F(KvBlockFileTest, UnknownFlagsAreRefusedEvenWithAGoodChecksum) {
  std::vector<uint8_t> file = EncodeKvBlockFile(kIdentity, hash_, parent_, payload_);
  const size_t flags = 8 + 4 + 4 + std::string_view(kIdentity).size() + 16;
  file[flags] |= 4;
  // The header's checksum, recomputed as a writer of a newer format would.
  const size_t header = KvBlockHeaderBytes(kIdentity);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, file.data(), static_cast<uInt>(header - 4));
  for (size_t i = 0; i < 4; ++i) file[header - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  auto decoded = DecodeKvBlockHeader(kIdentity, file);
  EXPECT_TRUE(absl::IsDataLoss(decoded.status())) << decoded.status();
  EXPECT_NE(decoded.status().message().find("unknown flags"), std::string::npos) << decoded.status();
}

TEST_F(KvBlockFileTest, AnyFlippedByteIsRefused) {
  const std::vector<uint8_t> file = EncodeKvBlockFile(kIdentity, hash_, parent_, payload_);
  for (size_t i = 0; i < file.size(); ++i) {
    std::vector<uint8_t> bad = file;
    bad[i] ^= 0x40;
    EXPECT_FALSE(DecodeKvBlockFile(kIdentity, hash_, 64, bad).ok()) << "byte " << i << " flipped was accepted";
  }
}

TEST_F(KvBlockFileTest, TruncatedForeignAndOtherHashesAreRefusedByName) {
  const std::vector<uint8_t> file = EncodeKvBlockFile(kIdentity, hash_, parent_, payload_);
  const std::span<const uint8_t> whole(file);
  auto truncated = DecodeKvBlockFile(kIdentity, hash_, 64, whole.first(file.size() - 1));
  EXPECT_TRUE(absl::IsDataLoss(truncated.status())) << truncated.status();
  auto short_header = DecodeKvBlockHeader(kIdentity, whole.first(20));
  EXPECT_TRUE(absl::IsDataLoss(short_header.status())) << short_header.status();
  auto foreign = DecodeKvBlockFile("Qwen|cpu/1|block_size=16|block_bytes=64", hash_, 64, file);
  EXPECT_TRUE(absl::IsFailedPrecondition(foreign.status())) << foreign.status();
  EXPECT_NE(foreign.status().message().find("SmolLM2"), std::string::npos) << foreign.status();
  auto other = DecodeKvBlockFile(kIdentity, parent_, 64, file);
  EXPECT_TRUE(absl::IsNotFound(other.status())) << other.status();
  auto size = DecodeKvBlockFile(kIdentity, hash_, 65, file);
  EXPECT_TRUE(absl::IsDataLoss(size.status())) << size.status();
  std::vector<uint8_t> junk(100, 'x');
  EXPECT_TRUE(absl::IsDataLoss(DecodeKvBlockHeader(kIdentity, junk).status()));
}

}  // namespace
}  // namespace kvfleet::engine
