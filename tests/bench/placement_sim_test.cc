// The placement simulator on small clusters: every request finishes and the
// block accounting balances for every workload and policy, the same seed
// gives the same figures, no policy beats the oracle bound, and the figures
// move the way the design says (these are simulated counts, not timings).
#include "bench/placement_sim.h"

#include <gtest/gtest.h>

namespace kvfleet::bench::placement_sim {
namespace {

using router::Policy;

ClusterShape SmallCluster(int32_t workers) {
  return {.workers = workers,
          .kv_tokens = 3 * 700,  // about three tenants' contexts a worker
          .block_size = 16,
          .max_num_seqs = 32,
          .max_num_batched_tokens = 1024,
          .model = *NamedStepModel("gpu")};
}

WorkloadOptions Small(WorkloadKind kind) {
  return {.kind = kind,
          .requests = 400,
          .seed = 7,
          .tenants = 12,
          .context_tokens = 512,
          .question_tokens = 24,
          .output_tokens = 16,
          .turns = 4,
          .think_seconds = 0.5};
}

SimResult MustSimulate(const Workload& w, const ClusterShape& c, Policy policy) {
  absl::StatusOr<SimResult> r = Simulate(w, {.cluster = c, .policy = policy});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(PlacementSimTest, EveryRequestFinishesAndTheBlocksBalance) {
  const ClusterShape cluster = SmallCluster(4);
  for (WorkloadKind kind :
       {WorkloadKind::kMultiTenant, WorkloadKind::kMultiTurn, WorkloadKind::kHotPrefix, WorkloadKind::kNoSharing}) {
    const Workload w = BuildWorkload(Small(kind), 0.8, cluster);
    ASSERT_EQ(w.requests.size(), 400u) << WorkloadName(kind);
    const double oracle = OracleHitRatio(w, cluster).bound;
    for (Policy policy : {Policy::kRoundRobin, Policy::kLeastLoaded, Policy::kPrefixAware}) {
      const SimResult r = MustSimulate(w, cluster, policy);
      const std::string where = WorkloadName(kind) + " " + r.policy;
      EXPECT_EQ(r.finished, r.requests) << where;
      EXPECT_EQ(r.audit, "") << where;
      EXPECT_GT(r.tokens_computed, 0) << where;
      EXPECT_LE(r.hit_ratio, oracle + 1e-9) << where << ": beat the oracle bound " << oracle;
      EXPECT_GT(r.ttft_p50_s, 0) << where;
      EXPECT_LE(r.ttft_p50_s, r.ttft_p90_s) << where;
      EXPECT_LE(r.ttft_p90_s, r.ttft_p99_s) << where;
    }
    if (kind == WorkloadKind::kNoSharing) {
      EXPECT_EQ(oracle, 0.0);
    }
  }
}

TEST(PlacementSimTest, TheSameSeedGivesTheSameFigures) {
  const ClusterShape cluster = SmallCluster(4);
  const Workload a = BuildWorkload(Small(WorkloadKind::kMultiTenant), 0.8, cluster);
  const Workload b = BuildWorkload(Small(WorkloadKind::kMultiTenant), 0.8, cluster);
  const SimResult x = MustSimulate(a, cluster, Policy::kPrefixAware);
  const SimResult y = MustSimulate(b, cluster, Policy::kPrefixAware);
  EXPECT_EQ(x.tokens_computed, y.tokens_computed);
  EXPECT_EQ(x.ttft_p90_s, y.ttft_p90_s);
  EXPECT_EQ(x.hit_ratio, y.hit_ratio);
  WorkloadOptions other = Small(WorkloadKind::kMultiTenant);
  other.seed = 8;
  const SimResult z = MustSimulate(BuildWorkload(other, 0.8, cluster), cluster, Policy::kPrefixAware);
  EXPECT_NE(x.tokens_computed, z.tokens_computed);
}

TEST(PlacementSimTest, PrefixAwareComputesLessWhereContextsAreShared) {
  const ClusterShape cluster = SmallCluster(8);
  const Workload w = BuildWorkload(Small(WorkloadKind::kMultiTenant), 0.8, cluster);
  const SimResult rr = MustSimulate(w, cluster, Policy::kRoundRobin);
  const SimResult pa = MustSimulate(w, cluster, Policy::kPrefixAware);
  EXPECT_LT(pa.tokens_computed, rr.tokens_computed);
  EXPECT_GT(pa.hit_ratio, rr.hit_ratio);
}

TEST(PlacementSimTest, LoadIsTheOfferedTokenRateOverThePeak) {
  const ClusterShape cluster = SmallCluster(4);
  const Workload w = BuildWorkload(Small(WorkloadKind::kNoSharing), 0.5, cluster);
  double tokens = 0;
  for (const SimRequest& r : w.requests) tokens += static_cast<double>(r.prompt_tokens() + r.answer.size());
  const double rate = tokens / w.requests.back().arrival_s;
  EXPECT_NEAR(rate / (4 * cluster.PeakTokensPerSecond()), 0.5, 0.05);
}

TEST(PlacementSimTest, BadInputIsRefusedWithTheFix) {
  ClusterShape cluster = SmallCluster(4);
  cluster.kv_tokens = 64;  // no request fits
  const absl::StatusOr<SimResult> r =
      Simulate(BuildWorkload(Small(WorkloadKind::kMultiTenant), 0.5, cluster), {.cluster = cluster});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--kv-tokens"), std::string::npos) << r.status();
  EXPECT_FALSE(ParseWorkload("multi_tenant").ok());
  EXPECT_FALSE(NamedStepModel("tpu").ok());
}

}  // namespace
}  // namespace kvfleet::bench::placement_sim
