#include "common/host_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/testing/temp_dir.h"

namespace kvfleet {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(HostMemoryTest, MemAvailableIsReadFromMeminfo) {
  testing::TempDir dir;
  Write(dir.Path("meminfo"), "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n");
  EXPECT_EQ(*MemAvailableBytes(dir.Path("meminfo")), 2048 * 1024);
  EXPECT_EQ(MemAvailableBytes(dir.Path("missing")).status().code(), absl::StatusCode::kUnavailable);
  const auto real = MemAvailableBytes();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_GT(*real, 0);
}

TEST(HostMemoryTest, CgroupV2HeadroomIsLimitMinusUsage) {
  testing::TempDir dir;
  Write(dir.Path("cg/memory.max"), "1073741824\n");
  Write(dir.Path("cg/memory.current"), "268435456\n");
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("cg")), int64_t{805306368});
  Write(dir.Path("cg/memory.current"), "2147483648\n");  // over the limit: no headroom, never negative
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("cg")), int64_t{0});
}

TEST(HostMemoryTest, NoLimitMeansNoHeadroomFigure) {
  testing::TempDir dir;
  Write(dir.Path("v2/memory.max"), "max\n");
  Write(dir.Path("v2/memory.current"), "4096\n");
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("v2")), std::nullopt);
  // cgroup v1 reports "no limit" as a huge number.
  Write(dir.Path("v1/memory/memory.limit_in_bytes"), "9223372036854771712\n");
  Write(dir.Path("v1/memory/memory.usage_in_bytes"), "4096\n");
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("v1")), std::nullopt);
  Write(dir.Path("v1/memory/memory.limit_in_bytes"), "8192\n");
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("v1")), int64_t{4096});
  EXPECT_EQ(CgroupMemoryHeadroomBytes(dir.Path("nothing")), std::nullopt);
}

TEST(HostMemoryTest, HostFreeMemoryIsAtMostMemAvailable) {
  // MemAvailable moves as other processes run: the figure read between two
  // readings is at most the larger of them.
  const auto before = MemAvailableBytes();
  const auto free = HostFreeMemoryBytes();
  const auto after = MemAvailableBytes();
  ASSERT_TRUE(free.ok() && before.ok() && after.ok()) << free.status();
  EXPECT_GT(*free, 0);
  EXPECT_LE(*free, std::max(*before, *after));
}

}  // namespace
}  // namespace kvfleet
