#include "tools/cluster/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/testing/temp_dir.h"

namespace kvfleet::cluster {
namespace {

std::unique_ptr<ChildProcess> StartShell(const std::string& script, const std::string& stderr_path = "") {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start("/bin/sh", {"-c", script}, stderr_path);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? *std::move(child) : nullptr;
}

TEST(ChildProcessTest, WaitsForALineThenDiesOfSigterm) {
  auto child = StartShell("echo hi; echo ready now; sleep 30");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<std::string> line = child->WaitForLine("ready", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "ready now");
  EXPECT_TRUE(child->Running());
  child->Signal(SIGTERM);
  absl::StatusOr<int> code = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_FALSE(child->Running());
  EXPECT_EQ(child->StdoutLines(), (std::vector<std::string>{"hi", "ready now"}));
}

TEST(ChildProcessTest, ReportsExitCodes) {
  for (int code : {0, 3, 42}) {
    auto child = StartShell("exit " + std::to_string(code));
    ASSERT_NE(child, nullptr);
    absl::StatusOr<int> got = child->Wait(absl::Seconds(10));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, code);
    EXPECT_EQ(*child->Wait(absl::Seconds(1)), code) << "a second Wait returns the same code";
  }
}

TEST(ChildProcessTest, LineNeverPrintedTimesOutWithTheLinesSeen) {
  auto child = StartShell("echo first; sleep 30");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<std::string> line = child->WaitForLine("never", absl::Milliseconds(300));
  ASSERT_FALSE(line.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(line.status())) << line.status();
  EXPECT_NE(line.status().message().find("first"), std::string::npos) << line.status();
}

TEST(ChildProcessTest, LineNeverPrintedBeforeExitFailsAtEof) {
  auto child = StartShell("echo one; printf 'two'");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<std::string> line = child->WaitForLine("three", absl::Seconds(10));
  ASSERT_FALSE(line.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(line.status())) << line.status();
  EXPECT_NE(line.status().message().find("two"), std::string::npos) << "an unterminated last line counts";
}

TEST(ChildProcessTest, KeepsDrainingAfterTheLine) {
  // 1 MiB after "ready" is far more than a pipe holds: the child only exits
  // if someone keeps reading.
  auto child = StartShell("echo ready; head -c 1048576 /dev/zero | tr '\\0' 'x'; echo; echo done");
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->WaitForLine("ready", absl::Seconds(10)).ok());
  absl::StatusOr<int> code = child->Wait(absl::Seconds(20));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_TRUE(child->WaitForLine("done", absl::Seconds(10)).ok());
}

TEST(ChildProcessTest, AppendsStderrToAFile) {
  testing::TempDir dir;
  const std::string path = dir.Path("stderr.log");
  std::ofstream(path) << "earlier\n";
  auto child = StartShell("echo oops >&2", path);
  ASSERT_NE(child, nullptr);
  ASSERT_EQ(*child->Wait(absl::Seconds(10)), 0);
  std::stringstream contents;
  contents << std::ifstream(path).rdbuf();
  EXPECT_EQ(contents.str(), "earlier\noops\n");
}

TEST(ChildProcessTest, MissingProgramFailsToStart) {
  auto child = ChildProcess::Start("/nonexistent/kvfleet-no-such-binary", {});
  EXPECT_FALSE(child.ok());
}

// True once `pid` is gone or a zombie (a container's init may not reap).
bool Dead(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  stat >> pid_field >> comm >> state;
  return !stat || state == "Z";
}

bool DiesWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Dead(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(ChildProcessTest, DestructorKillsARunningChildAndItsChildren) {
  // The backgrounded sleep holds stdout open after sh is killed; destruction
  // must neither hang on it nor leave it running.
  auto child = StartShell("sleep 30 & echo started $!; wait");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<std::string> line = child->WaitForLine("started", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << line.status();
  const pid_t grandchild = std::stoi(line->substr(std::string("started ").size()));
  const absl::Time start = absl::Now();
  child.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(DiesWithin(grandchild, absl::Seconds(5)));
}

TEST(ChildProcessTest, DestructorKillsGrandchildrenOfAnExitedChild) {
  auto child = StartShell("sleep 30 & echo started $!");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<std::string> line = child->WaitForLine("started", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << line.status();
  const pid_t grandchild = std::stoi(line->substr(std::string("started ").size()));
  ASSERT_EQ(*child->Wait(absl::Seconds(10)), 0);
  EXPECT_FALSE(Dead(grandchild));
  child.reset();
  EXPECT_TRUE(DiesWithin(grandchild, absl::Seconds(5)));
}

}  // namespace
}  // namespace kvfleet::cluster
