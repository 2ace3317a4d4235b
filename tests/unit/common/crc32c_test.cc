// Crc32c: the standard check value, chaining, and the hardware path equal
// to the table at every length and alignment.
#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

namespace kvfleet {
namespace {

std::span<const uint8_t> Bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(Crc32cTest, TheCheckValueOfTheCastagnoliPolynomial) {
  EXPECT_EQ(Crc32c(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(Bytes("")), 0u);
}

TEST(Crc32cTest, ChainedSpansGiveTheWholesValue) {
  const std::string_view text = "the quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(Crc32c(Bytes(text.substr(cut)), Crc32c(Bytes(text.substr(0, cut)))), Crc32c(Bytes(text))) << cut;
  }
}

TEST(Crc32cTest, EveryLengthAndAlignmentMatchesTheTable) {
  std::mt19937 rng(3);
  std::vector<uint8_t> data(4096 + 16);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{1000}, size_t{4096}}) {
      const std::span<const uint8_t> s(data.data() + offset, n);
      EXPECT_EQ(Crc32c(s), Crc32cPortable(s)) << offset << " " << n;
    }
  }
  // One flipped bit changes it.
  std::vector<uint8_t> flipped(data.begin(), data.begin() + 4096);
  const uint32_t before = Crc32c(flipped);
  flipped[1234] ^= 0x10;
  EXPECT_NE(Crc32c(flipped), before);
}

}  // namespace
}  // namespace kvfleet
