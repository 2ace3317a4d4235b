// The memory plan: a size or a fraction of what is free after weights and
// scratch, the draft's cache sized with the target's, and refusals that say
// what to do.
#include "engine/executor/memory_plan.h"

#include <gtest/gtest.h>

namespace kvfleet::engine {
namespace {

// Reports fixed figures; runs nothing.
class SizedExecutor : public ModelExecutor {
 public:
  SizedExecutor(int64_t weights, int64_t scratch, int64_t kv_bytes_per_token, int64_t free, bool excludes_own,
                int64_t resident = 0)
      : memory_{.weight_bytes = weights, .scratch_bytes = scratch, .resident_bytes = resident},
        free_{free, excludes_own} {
    info_ = {.device = Device{.kind = excludes_own ? DeviceKind::kCuda : DeviceKind::kCpu},
             .context_length = 8192,
             .block_size = 16,
             .kv_bytes_per_token = kv_bytes_per_token};
  }
  const ExecutorInfo& info() const override { return info_; }
  ExecutorMemory memory() const override { return memory_; }
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override { return free_; }
  absl::Status AllocateKvCache(int64_t) override { return absl::OkStatus(); }
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch&) override { return ForwardOutput{}; }

 private:
  ExecutorInfo info_;
  ExecutorMemory memory_;
  DeviceFreeMemory free_;
};

constexpr int64_t kMiB = 1 << 20;

TEST(MemoryPlanTest, ASizeIsTakenAsGivenInWholeBlocks) {
  // SmolLM2-135M: 23,040 bytes per token.
  const SizedExecutor cpu(100 * kMiB, 10 * kMiB, 23040, int64_t{8} << 30, /*excludes_own=*/false);
  const auto plan = PlanMemory({.kv_cache_memory = "1GiB", .target = &cpu});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_blocks, 2912);  // 2^30 / (23,040 B × 16)
  EXPECT_EQ(plan->kv_cache_bytes, 2912 * 16 * 23040);
  EXPECT_EQ(plan->full_context_sequences, 5);  // 2912 / 512 blocks per 8192-token sequence
  EXPECT_EQ(plan->free_bytes, (int64_t{8} << 30) - 110 * kMiB) << "the CPU's own weights and scratch come off";
  EXPECT_NE(plan->ToString().find("kv_cache"), std::string::npos);
}

// The CPU's packed weights for 8-bit activations are written before the
// plan reads the free memory: they are out of it already, not twice.
TEST(MemoryPlanTest, WhatIsAlreadyResidentIsNotSubtractedAgain) {
  const SizedExecutor cpu(100 * kMiB, 10 * kMiB, 23040, int64_t{8} << 30, /*excludes_own=*/false,
                          /*resident=*/96 * kMiB);
  const SizedExecutor draft(50 * kMiB, 5 * kMiB, 23040, 0, /*excludes_own=*/false, /*resident=*/40 * kMiB);
  const auto plan = PlanMemory({.kv_cache_memory = "1GiB", .target = &cpu, .draft = &draft});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->free_bytes, (int64_t{8} << 30) - (110 - 96) * kMiB - (55 - 40) * kMiB);
  EXPECT_EQ(plan->weight_bytes, 100 * kMiB) << "the plan still shows everything the executors hold";
}

TEST(MemoryPlanTest, AFractionIsOfWhatIsFreeOnceWeightsAndScratchAreIn) {
  const SizedExecutor gpu(1000 * kMiB, 200 * kMiB, 32768, int64_t{10} << 30, /*excludes_own=*/true);
  const auto plan = PlanMemory({.kv_cache_memory = "0.5", .target = &gpu});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->free_bytes, int64_t{10} << 30) << "cudaMemGetInfo already excludes them";
  EXPECT_EQ(plan->kv_budget_bytes, int64_t{5} << 30);
  EXPECT_EQ(plan->num_blocks, (int64_t{5} << 30) / (32768 * 16));

  const SizedExecutor cpu(1000 * kMiB, 200 * kMiB, 32768, int64_t{10} << 30, /*excludes_own=*/false);
  const auto cpu_plan = PlanMemory({.kv_cache_memory = "0.5", .target = &cpu});
  ASSERT_TRUE(cpu_plan.ok());
  EXPECT_EQ(cpu_plan->kv_budget_bytes, ((int64_t{10} << 30) - 1200 * kMiB) / 2);
}

// A CPU worker's host KV tier lives in the same memory as its KV cache: it
// comes off what is free before a fraction or a size is applied. A GPU's
// host tier is not in the device's memory.
TEST(MemoryPlanTest, ACpuWorkersHostTierComesOffWhatIsFree) {
  const SizedExecutor cpu(1000 * kMiB, 200 * kMiB, 32768, int64_t{10} << 30, /*excludes_own=*/false);
  const auto plan = PlanMemory({.kv_cache_memory = "0.5", .target = &cpu, .host_kv_tier_bytes = int64_t{4} << 30});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->free_bytes, (int64_t{6} << 30) - 1200 * kMiB);
  EXPECT_EQ(plan->kv_budget_bytes, ((int64_t{6} << 30) - 1200 * kMiB) / 2);
  EXPECT_NE(plan->ToString().find("host_kv_tier"), std::string::npos);
  const auto too_big = PlanMemory({.kv_cache_memory = "6GiB", .target = &cpu, .host_kv_tier_bytes = int64_t{4} << 30});
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status())) << too_big.status();
  const SizedExecutor gpu(1000 * kMiB, 200 * kMiB, 32768, int64_t{10} << 30, /*excludes_own=*/true);
  const auto gpu_plan = PlanMemory({.kv_cache_memory = "0.5", .target = &gpu, .host_kv_tier_bytes = int64_t{4} << 30});
  ASSERT_TRUE(gpu_plan.ok());
  EXPECT_EQ(gpu_plan->free_bytes, int64_t{10} << 30);
  EXPECT_EQ(gpu_plan->host_kv_tier_bytes, 0);
}

TEST(MemoryPlanTest, TheDraftsCacheHasAsManyBlocksAsTheTargets) {
  const SizedExecutor target(100 * kMiB, 10 * kMiB, 3000, int64_t{4} << 30, true);
  const SizedExecutor draft(20 * kMiB, 5 * kMiB, 1000, int64_t{4} << 30, true);
  const auto plan = PlanMemory({.kv_cache_memory = "64MiB", .target = &target, .draft = &draft});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_blocks, 64 * kMiB / (4000 * 16));
  EXPECT_EQ(plan->kv_cache_bytes, plan->num_blocks * 16 * 3000);
  EXPECT_EQ(plan->draft_kv_cache_bytes, plan->num_blocks * 16 * 1000);
  EXPECT_EQ(plan->draft_weight_bytes, 20 * kMiB);
  EXPECT_LE(plan->kv_cache_bytes + plan->draft_kv_cache_bytes, 64 * kMiB);
}

TEST(MemoryPlanTest, RefusalsSayWhatToDo) {
  const SizedExecutor small(100 * kMiB, 10 * kMiB, 23040, 500 * kMiB, false);
  const auto too_big = PlanMemory({.kv_cache_memory = "1GiB", .target = &small});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("390 MiB free on cpu"), std::string::npos) << too_big.status();
  EXPECT_NE(too_big.status().message().find("fraction"), std::string::npos);

  const auto no_block = PlanMemory({.kv_cache_memory = "1000", .target = &small});
  EXPECT_EQ(no_block.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_block.status().message().find("holds no block"), std::string::npos) << no_block.status();
  for (const char* bad : {"1.5", "0.0", "lots"}) {
    EXPECT_EQ(PlanMemory({.kv_cache_memory = bad, .target = &small}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace kvfleet::engine
