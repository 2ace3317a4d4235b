#include "tools/cluster/service_binaries.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/temp_dir.h"

namespace kvfleet::cluster {
namespace {

void WriteExecutable(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << "#!/bin/sh\n";
  ::chmod(path.c_str(), 0755);
}

TEST(DefaultBinDirTest, TheBuildTreeOfABuiltKvfleetElseItsOwnDirectory) {
  EXPECT_EQ(DefaultBinDir("/src/build/tools/kvfleet/kvfleet"), "/src/build");
  EXPECT_EQ(DefaultBinDir("/usr/local/bin/kvfleet"), "/usr/local/bin");
  EXPECT_EQ(DefaultBinDir("/opt/kvfleet/kvfleet"), "/opt/kvfleet");
}

TEST(CurrentExecutableTest, IsThisTest) {
  absl::StatusOr<std::string> exe = CurrentExecutable();
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(std::filesystem::path(*exe).filename(), "cluster_test");
}

TEST(FindServiceBinariesTest, BuildTreeLayout) {
  testing::TempDir dir;
  for (const char* svc : {"cachemanager", "worker", "router"}) {
    WriteExecutable(dir.Path(std::string("services/") + svc + "/kvfleet-" + svc));
  }
  absl::StatusOr<ServiceBinaries> b = FindServiceBinaries(dir.path());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->worker, dir.Path("services/worker/kvfleet-worker"));
  EXPECT_EQ(b->router, dir.Path("services/router/kvfleet-router"));
  EXPECT_EQ(b->cachemanager, dir.Path("services/cachemanager/kvfleet-cachemanager"));
}

TEST(FindServiceBinariesTest, SideBySideLayout) {
  testing::TempDir dir;
  for (const char* name : {"kvfleet-cachemanager", "kvfleet-worker", "kvfleet-router"}) WriteExecutable(dir.Path(name));
  absl::StatusOr<ServiceBinaries> b = FindServiceBinaries(dir.path());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->router, dir.Path("kvfleet-router"));
}

TEST(FindServiceBinariesTest, AMissingOrNonExecutableBinaryNamesThePathsTried) {
  testing::TempDir dir;
  WriteExecutable(dir.Path("kvfleet-cachemanager"));
  WriteExecutable(dir.Path("kvfleet-worker"));
  std::ofstream(dir.Path("kvfleet-router")) << "not executable";
  absl::StatusOr<ServiceBinaries> b = FindServiceBinaries(dir.path());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(dir.Path("services/router/kvfleet-router")), std::string::npos) << b.status();
  EXPECT_NE(b.status().message().find("--bin-dir"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace kvfleet::cluster
