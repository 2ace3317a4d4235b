#include "common/host_cpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/testing/temp_dir.h"

namespace kvfleet {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(HostCpusTest, CgroupV2QuotaIsQuotaOverPeriod) {
  testing::TempDir dir;
  Write(dir.Path("cg/cpu.max"), "250000 100000\n");
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota(dir.Path("cg")), 2.5);
  Write(dir.Path("cg/cpu.max"), "max 100000\n");
  EXPECT_EQ(CgroupCpuQuota(dir.Path("cg")), std::nullopt) << "no limit";
}

TEST(HostCpusTest, CgroupV1QuotaAndItsUnlimitedMinusOne) {
  testing::TempDir dir;
  Write(dir.Path("cg/cpu/cpu.cfs_quota_us"), "400000\n");
  Write(dir.Path("cg/cpu/cpu.cfs_period_us"), "100000\n");
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota(dir.Path("cg")), 4.0);
  Write(dir.Path("cg/cpu/cpu.cfs_quota_us"), "-1\n");
  EXPECT_EQ(CgroupCpuQuota(dir.Path("cg")), std::nullopt);
}

TEST(HostCpusTest, NothingReadableMeansNoQuota) {
  testing::TempDir dir;
  EXPECT_EQ(CgroupCpuQuota(dir.Path("absent")), std::nullopt);
  Write(dir.Path("bad/cpu.max"), "lots 100000\n");
  EXPECT_EQ(CgroupCpuQuota(dir.Path("bad")), std::nullopt);
}

TEST(HostCpusTest, UsableCpusIsBetweenOneAndTheHardwareThreads) {
  const int cpus = UsableCpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace kvfleet
