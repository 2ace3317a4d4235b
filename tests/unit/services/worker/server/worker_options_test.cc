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

TEST(WorkerOptionsTest, TensorParallelTakesVllmsSpellingAndAChaosFault) {
  EXPECT_EQ(ParseWorkerOptions(Args({}))->tensor_parallel, 1);
  EXPECT_EQ(ParseWorkerOptions(Args({"--tensor-parallel", "3"}))->tensor_parallel, 3);
  EXPECT_EQ(ParseWorkerOptions(Args({"--tensor-parallel-size", "2"}))->tensor_parallel, 2);
  EXPECT_EQ(ParseWorkerOptions(Args({"--tensor-parallel", "2", "--tensor-parallel-size", "2"}))->tensor_parallel, 2);
  const auto both = ParseWorkerOptions(Args({"--tensor-parallel", "2", "--tensor-parallel-size", "4"}));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("--tensor-parallel-size 4"), std::string::npos) << both.status();
  const auto zero = ParseWorkerOptions(Args({"--tensor-parallel", "0"}));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("--tensor-parallel"), std::string::npos) << zero.status();
  const auto fault = ParseWorkerOptions(Args({"--tensor-parallel", "2", "--fault-tensor-parallel-rank", "1:5"}));
  ASSERT_TRUE(fault.ok()) << fault.status();
  EXPECT_EQ(fault->fault_tensor_parallel_rank.rank, 1);
  EXPECT_EQ(fault->fault_tensor_parallel_rank.at_step, 5);
  for (const char* bad : {"2:5", "1", "1:0", "x:1"}) {
    EXPECT_FALSE(ParseWorkerOptions(Args({"--tensor-parallel", "2", "--fault-tensor-parallel-rank", bad})).ok()) << bad;
  }
}

TEST(WorkerOptionsTest, WindowBlocksAreFreedUnlessKept) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->free_window_blocks);
  const absl::StatusOr<WorkerOptions> kept = ParseWorkerOptions(Args({"--keep-window-blocks"}));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->free_window_blocks);
}

TEST(WorkerOptionsTest, KvTransferIsOffByDefaultAndItsLimitsAreChecked) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->kv_transfer_listen.empty());
  EXPECT_EQ(defaults->kv_transfer_max_pulls, 4);
  EXPECT_EQ(defaults->kv_transfer_deadline, std::chrono::milliseconds(10000));
  const absl::StatusOr<WorkerOptions> on = ParseWorkerOptions(
      Args({"--kv-transfer-listen", "0.0.0.0:7002", "--kv-transfer-deadline", "2.5", "--kv-transfer-max-pulls", "8"}));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->kv_transfer_listen, "0.0.0.0:7002");
  EXPECT_EQ(on->kv_transfer_deadline, std::chrono::milliseconds(2500));
  EXPECT_EQ(on->kv_transfer_max_pulls, 8);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--kv-transfer-max-pulls", "0"}, {"--kv-transfer-deadline", "0"}, {"--fault-kv-transfer", "drop"}}) {
    const absl::StatusOr<WorkerOptions> o = ParseWorkerOptions(Args(bad));
    ASSERT_FALSE(o.ok()) << bad[0];
    EXPECT_NE(o.status().message().find(bad[0]), std::string::npos) << o.status();
  }
}

TEST(WorkerOptionsTest, RolesDefaultToBothAndAPrefillWorkerNeedsATransferPort) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->role, WorkerRole::kBoth);
  EXPECT_EQ(defaults->kv_lease, std::chrono::milliseconds(30000));
  const absl::StatusOr<WorkerOptions> prefill = ParseWorkerOptions(
      Args({"--role", "prefill", "--kv-transfer-listen", "0.0.0.0:7002", "--kv-lease-seconds", "2.5"}));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(prefill->role, WorkerRole::kPrefill);
  EXPECT_EQ(prefill->kv_lease, std::chrono::milliseconds(2500));
  const absl::StatusOr<WorkerOptions> decode = ParseWorkerOptions(Args({"--role", "decode"}));
  ASSERT_TRUE(decode.ok()) << decode.status();
  EXPECT_EQ(decode->role, WorkerRole::kDecode);
  const absl::StatusOr<WorkerOptions> portless = ParseWorkerOptions(Args({"--role", "prefill"}));
  ASSERT_FALSE(portless.ok());
  EXPECT_NE(portless.status().message().find("--kv-transfer-listen"), std::string::npos) << portless.status();
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--role", "prefil"}, {"--role", ""}, {"--kv-lease-seconds", "0"}, {"--kv-lease-seconds", "7200"}}) {
    const absl::StatusOr<WorkerOptions> o = ParseWorkerOptions(Args(bad));
    ASSERT_FALSE(o.ok()) << bad[0] << " " << bad[1];
    EXPECT_NE(o.status().message().find(bad[0]), std::string::npos) << o.status();
  }
}

TEST(WorkerOptionsTest, ModesDefaultToAutoAndTakeTheCalibrationRecordsPath) {
  const absl::StatusOr<WorkerOptions> defaults = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_FALSE(defaults->mode.activations.has_value());
  EXPECT_FALSE(defaults->mode.kv.has_value());
  EXPECT_EQ(defaults->calibration_path, "");
  const absl::StatusOr<WorkerOptions> given =
      ParseWorkerOptions(Args({"--cpu-activations", "q8", "--kv-cache-dtype", "int8", "--calibration", "r.json"}));
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->mode.activations, engine::CpuActivations::kQ8);
  EXPECT_EQ(given->mode.kv, kernels::KvCacheDtype::kInt8);
  EXPECT_EQ(given->calibration_path, "r.json");
  const absl::StatusOr<WorkerOptions> bad = ParseWorkerOptions(Args({"--cpu-activations", "q4"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--cpu-activations must be f32 or q8, not 'q4', or auto"), std::string::npos)
      << bad.status();
}

TEST(WorkerOptionsTest, LoraAdaptersTheirSlotsAndRankAreCheckedByName) {
  const absl::StatusOr<WorkerOptions> none = ParseWorkerOptions(Args({}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->max_loras, 0) << "no adapters unless asked";
  const absl::StatusOr<WorkerOptions> two =
      ParseWorkerOptions(Args({"--lora", "sql=/a/sql", "--lora", "chat=/a/chat", "--max-lora-rank", "8"}));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->loras, (std::vector<std::pair<std::string, std::string>>{{"sql", "/a/sql"}, {"chat", "/a/chat"}}));
  EXPECT_EQ(two->max_loras, 2) << "one slot per adapter given";
  EXPECT_EQ(two->max_lora_rank, 8);
  const absl::StatusOr<WorkerOptions> dir = ParseWorkerOptions(Args({"--lora-dir", "/adapters"}));
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->max_loras, 1);
  const absl::StatusOr<WorkerOptions> malformed = ParseWorkerOptions(Args({"--lora", "sql"}));
  EXPECT_NE(malformed.status().message().find("NAME=PATH"), std::string_view::npos) << malformed.status();
  const absl::StatusOr<WorkerOptions> no_slots = ParseWorkerOptions(Args({"--lora", "a=/a", "--max-loras", "0"}));
  EXPECT_NE(no_slots.status().message().find("--max-loras"), std::string_view::npos) << no_slots.status();
  EXPECT_FALSE(ParseWorkerOptions(Args({"--max-lora-rank", "1024"})).ok());
}

}  // namespace
}  // namespace kvfleet::worker
