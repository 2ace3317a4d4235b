#include "services/worker/server/worker_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvfleet::worker {
namespace {

std::vector<std::string> Args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", "m.gguf"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(WorkerOptionsTest, AdmissionBypassReachesTheScheduler) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(ResolveScheduler(*defaults, engine::DeviceKind::kCpu)->admission_bypass_limit,
            engine::SchedulerConfig{}.admission_bypass_limit);
  const absl::StatusOr<WorkerOptions> strict = ParseWorkerOptions(Args({"--admission-bypass", "0"}));
  ASSERT_TRUE(strict.ok()) << strict.status();
  EXPECT_EQ(ResolveScheduler(*strict, engine::DeviceKind::kCuda)->admission_bypass_limit, 0);
}

TEST(WorkerOptionsTest, NegativeAdmissionBypassIsRefusedByName) {
  const absl::StatusOr<WorkerOptions> o = ParseWorkerOptions(Args({"--admission-bypass", "-1"}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--admission-bypass"), std::string::npos) << o.status();
}

TEST(WorkerOptionsTest, WindowBlocksAreFreedUnlessKept) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->free_window_blocks);
  const absl::StatusOr<WorkerOptions> kept = ParseWorkerOptions(Args({"--keep-window-blocks"}));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->free_window_blocks);
}

}  // namespace
}  // namespace kvfleet::worker
