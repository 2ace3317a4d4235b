#include "common/byte_size.h"

#include <gtest/gtest.h>

namespace kvfleet {
namespace {

TEST(ByteSizeTest, SuffixesMeanWhatTheySay) {
  EXPECT_EQ(*ParseByteSize("65536"), 65536);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2LL << 30);
  EXPECT_EQ(*ParseByteSize("2G"), 2LL << 30);
  EXPECT_EQ(*ParseByteSize("2GB"), 2000000000LL);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512LL << 20);
  EXPECT_EQ(*ParseByteSize(" 1.5 gib "), 3LL << 29);
  EXPECT_EQ(*ParseByteSize("4k"), 4096);
}

TEST(ByteSizeTest, NonsenseIsRefusedWithAnExample) {
  for (const char* bad : {"", "GiB", "2XB", "-1G", "1.2.3M", "0"}) {
    const auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_NE(ParseByteSize("lots").status().message().find("2GiB"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet
