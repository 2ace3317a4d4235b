#include "common/block_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvfleet {
namespace {

constexpr char kModel[] = "SmolLM2-135M-Instruct";

std::vector<int32_t> Iota(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

// Known answers computed independently of this code, so the byte encoding
// documented in common/block_hash.cc is pinned. Produced by:
//
// python3 -c 'import hashlib,struct; L=lambda b: struct.pack("<Q",len(b))+b;
//   r=hashlib.sha256(b"kvfleet-root\0"+L(b"SmolLM2-135M-Instruct")+L(b"")+L(b"")).digest()[:16]; print(r.hex());
//   c=hashlib.sha256(r[7::-1]+r[15:7:-1]+struct.pack("<Q",4)+struct.pack("<4i",1,2,-3,70000)+L(b"lora:a")).digest()[:16];
//   print(c.hex());
//   d=hashlib.sha256(c[7::-1]+c[15:7:-1]+struct.pack("<Q",4)+struct.pack("<4i",5,6,7,8)+L(b"")).digest()[:16];
//   print(d.hex())'
// python3 -c 'import hashlib,struct; L=lambda b: struct.pack("<Q",len(b))+b;
//   print(hashlib.sha256(b"kvfleet-root\0"+L(b"SmolLM2-135M-Instruct")+L(b"")+L(b"tenant-a")).digest()[:16].hex());
//   print(hashlib.sha256(b"kvfleet-root\0"+L(b"SmolLM2-135M-Instruct")+L(b"0123456789abcdef"*4)+L(b"tenant-a")).digest()[:16].hex())'
//
// (r[7::-1] and r[15:7:-1] are hi and lo as little-endian u64: hi is bytes
// 0..7 of the digest read big-endian.)
TEST(BlockHashTest, KnownAnswers) {
  const BlockHash root = RootBlockHash(kModel, "");
  EXPECT_EQ(root.ToHex(), "9c0d280e4ecb6a55b0f6400ff38f47cb");
  EXPECT_EQ(RootBlockHash(kModel, "tenant-a").ToHex(), "5713566516b215a86c2eed257836ecab");
  EXPECT_EQ(
      RootBlockHash(kModel, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "tenant-a").ToHex(),
      "9d2f06accb9ec31a4d4507e450676f80");

  const std::vector<int32_t> first = {1, 2, -3, 70000};
  const BlockHash c = ChainBlockHash(root, first, "lora:a");
  EXPECT_EQ(c.ToHex(), "1ffb4b799e39f3ba407ea48e0e577b6f");
  const std::vector<int32_t> second = {5, 6, 7, 8};
  EXPECT_EQ(ChainBlockHash(c, second).ToHex(), "6948ec1228829d716b6cfb87145d888c");
}

TEST(BlockHashTest, ToHexIsHiThenLoZeroPadded) {
  BlockHash h{.hi = 0x0123456789abcdefULL, .lo = 0xfULL};
  EXPECT_EQ(h.ToHex(), "0123456789abcdef000000000000000f");
  EXPECT_EQ(BlockHash{}.ToHex(), std::string(32, '0'));
}

TEST(BlockHashTest, Deterministic) {
  const std::vector<int32_t> tokens = Iota(64);
  EXPECT_EQ(RootBlockHash(kModel, "s"), RootBlockHash(kModel, "s"));
  const BlockHash root = RootBlockHash(kModel, "s");
  EXPECT_EQ(HashFullBlocks(root, tokens, 16), HashFullBlocks(root, tokens, 16));
  EXPECT_EQ(ChainBlockHash(root, tokens, "x"), ChainBlockHash(root, tokens, "x"));
}

TEST(BlockHashTest, SaltAndModelIdSeparateRoots) {
  const BlockHash base = RootBlockHash(kModel, "");
  EXPECT_NE(base, RootBlockHash(kModel, "tenant-a"));
  EXPECT_NE(RootBlockHash(kModel, "tenant-a"), RootBlockHash(kModel, "tenant-b"));
  EXPECT_NE(base, RootBlockHash("other-model", ""));
  // Length prefixes: moving bytes between the fields changes the hash.
  EXPECT_NE(RootBlockHash("ab", "c"), RootBlockHash("a", "bc"));
  EXPECT_NE(RootBlockHash("", "ab"), RootBlockHash("ab", ""));
  EXPECT_NE(RootBlockHash("a", "b", ""), RootBlockHash("a", "", "b"));
  // One id over two sets of weights: two roots.
  EXPECT_NE(RootBlockHash(kModel, "aaaa", ""), RootBlockHash(kModel, "bbbb", ""));
  EXPECT_EQ(RootBlockHash(kModel, "", "s"), RootBlockHash(kModel, "s"));
  // A LoRA adapter's identity roots its own tree; the base model's roots
  // are what they were before adapters existed.
  EXPECT_EQ(RootBlockHash(kModel, "fp", "s", ""), RootBlockHash(kModel, "fp", "s"));
  EXPECT_NE(RootBlockHash(kModel, "fp", "s", "sql@1234"), RootBlockHash(kModel, "fp", "s"));
  EXPECT_NE(RootBlockHash(kModel, "fp", "s", "sql@1234"), RootBlockHash(kModel, "fp", "s", "sql@5678"));
  EXPECT_NE(RootBlockHash(kModel, "fp", "", "s"), RootBlockHash(kModel, "fp", "s", ""));

  // The same tokens under different roots hash differently at every block.
  const std::vector<int32_t> tokens = Iota(32);
  const auto a = HashFullBlocks(base, tokens, 8);
  const auto b = HashFullBlocks(RootBlockHash(kModel, "tenant-a"), tokens, 8);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << i;
}

TEST(BlockHashTest, HashFullBlocksChainsBlockByBlock) {
  const BlockHash root = RootBlockHash(kModel, "");
  const std::vector<int32_t> tokens = Iota(12, 100);
  const auto hashes = HashFullBlocks(root, tokens, 4);
  ASSERT_EQ(hashes.size(), 3u);
  const std::span<const int32_t> all(tokens);
  EXPECT_EQ(hashes[0], ChainBlockHash(root, all.subspan(0, 4)));
  EXPECT_EQ(hashes[1], ChainBlockHash(hashes[0], all.subspan(4, 4)));
  EXPECT_EQ(hashes[2], ChainBlockHash(hashes[1], all.subspan(8, 4)));
}

TEST(BlockHashTest, ChangingAnEarlierBlockChangesEveryLaterHash) {
  const BlockHash root = RootBlockHash(kModel, "");
  const std::vector<int32_t> tokens = Iota(40);
  const auto base = HashFullBlocks(root, tokens, 8);
  ASSERT_EQ(base.size(), 5u);
  for (size_t changed = 0; changed < 40; changed += 7) {
    std::vector<int32_t> edited = tokens;
    edited[changed] += 1000;
    const auto hashes = HashFullBlocks(root, edited, 8);
    ASSERT_EQ(hashes.size(), base.size());
    const size_t block = changed / 8;
    for (size_t i = 0; i < base.size(); ++i) {
      if (i < block) {
        EXPECT_EQ(hashes[i], base[i]) << "token " << changed << " block " << i;
      } else {
        EXPECT_NE(hashes[i], base[i]) << "token " << changed << " block " << i;
      }
    }
  }
}

TEST(BlockHashTest, PartialBlockIgnored) {
  const BlockHash root = RootBlockHash(kModel, "");
  const std::vector<int32_t> full = Iota(32);
  std::vector<int32_t> longer = full;
  for (int32_t t : {7, 8, 9}) longer.push_back(t);
  EXPECT_EQ(HashFullBlocks(root, longer, 16), HashFullBlocks(root, full, 16));
  EXPECT_EQ(HashFullBlocks(root, longer, 16).size(), 2u);
  EXPECT_TRUE(HashFullBlocks(root, Iota(15), 16).empty());
  EXPECT_TRUE(HashFullBlocks(root, {}, 16).empty());
}

TEST(BlockHashTest, ExtraAndTokenCountMatter) {
  const BlockHash root = RootBlockHash(kModel, "");
  const std::vector<int32_t> tokens = Iota(4);
  EXPECT_NE(ChainBlockHash(root, tokens), ChainBlockHash(root, tokens, "adapter-1"));
  EXPECT_NE(ChainBlockHash(root, tokens, "adapter-1"), ChainBlockHash(root, tokens, "adapter-2"));
  const std::vector<int32_t> three = Iota(3);
  EXPECT_NE(ChainBlockHash(root, tokens), ChainBlockHash(root, three));
  // Negative and large ids encode as distinct 4-byte values.
  const std::vector<int32_t> neg = {-1};
  const std::vector<int32_t> big = {INT32_MAX};
  EXPECT_NE(ChainBlockHash(root, neg), ChainBlockHash(root, big));
}

TEST(BlockHashDeathTest, NonPositiveBlockSize) {
  const std::vector<int32_t> tokens = Iota(4);
  EXPECT_DEATH(HashFullBlocks(BlockHash{}, tokens, 0), "block_size");
}

TEST(BlockHashTest, BytesRoundTripBigEndianAndRefuseOtherLengths) {
  const BlockHash h{.hi = 0x0102030405060708ull, .lo = 0x1112131415161718ull};
  const std::string bytes = h.ToBytes();
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(bytes[15]), 0x18);
  EXPECT_EQ(BlockHash::FromBytes(bytes), h);
  EXPECT_EQ(BlockHash::FromBytes(bytes.substr(0, 15)), std::nullopt);
  EXPECT_EQ(BlockHash::FromBytes(bytes + "x"), std::nullopt);
  const BlockHash real = RootBlockHash("m", "");
  EXPECT_EQ(BlockHash::FromBytes(real.ToBytes()), real);
}

}  // namespace
}  // namespace kvfleet
