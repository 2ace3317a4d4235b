#include "services/router/frontend/tenant_quota.h"

#include <gtest/gtest.h>

namespace kvfleet::router {
namespace {

using std::chrono::milliseconds;

class TenantQuotaTest : public ::testing::Test {
 protected:
  TenantQuotas Make(TenantQuotaOptions o) {
    return TenantQuotas(o, [this] { return now_; });
  }
  void Advance(milliseconds d) { now_ += d; }

  TenantQuotas::Clock::time_point now_{};
};

TEST_F(TenantQuotaTest, RequestsPerSecondAdmitsTheBurstThenRefusesWithTheTimeToWait) {
  TenantQuotas q = Make({.requests_per_second = 2, .request_burst = 3});
  for (int i = 0; i < 3; ++i) {
    TenantQuotas::Admission a = q.Admit("a", 1);
    ASSERT_TRUE(a.lease.has_value()) << i;
  }
  TenantQuotas::Admission refused = q.Admit("a", 1);
  ASSERT_FALSE(refused.lease.has_value());
  EXPECT_EQ(refused.refusal.kind, QuotaKind::kRequests);
  EXPECT_EQ(refused.refusal.retry_after, milliseconds(500));
  EXPECT_NE(refused.refusal.message.find("tenant a"), std::string::npos) << refused.refusal.message;
  EXPECT_NE(refused.refusal.message.find("--tenant-requests-per-second"), std::string::npos);
  EXPECT_TRUE(q.Admit("b", 1).lease.has_value()) << "another tenant has its own bucket";
  Advance(milliseconds(499));
  EXPECT_FALSE(q.Admit("a", 1).lease.has_value()) << "a refusal is not charged, and the hint is exact";
  Advance(milliseconds(1));
  EXPECT_TRUE(q.Admit("a", 1).lease.has_value());
}

TEST_F(TenantQuotaTest, TokensAreChargedForThePromptAndTheGeneratedAndADebtMustBeRepaid) {
  TenantQuotas q = Make({.tokens_per_second = 100, .token_burst = 100});
  TenantQuotas::Admission first = q.Admit("a", 80);
  ASSERT_TRUE(first.lease.has_value());
  first.lease->Finish(70);  // 100 - 80 - 70 = -50: in debt
  TenantQuotas::Admission refused = q.Admit("a", 1);
  ASSERT_FALSE(refused.lease.has_value());
  EXPECT_EQ(refused.refusal.kind, QuotaKind::kTokens);
  EXPECT_EQ(refused.refusal.retry_after, milliseconds(500));
  Advance(milliseconds(500));
  EXPECT_TRUE(q.Admit("a", 1).lease.has_value()) << "the debt is repaid at the tenant's rate";
}

TEST_F(TenantQuotaTest, StreamsInFlightAreCountedUntilEachLeaseEnds) {
  TenantQuotas q = Make({.max_streams = 2});
  TenantQuotas::Admission one = q.Admit("a", 1);
  std::optional<TenantQuotas::Admission> two = q.Admit("a", 1);
  ASSERT_TRUE(one.lease && two->lease);
  TenantQuotas::Admission third = q.Admit("a", 1);
  ASSERT_FALSE(third.lease.has_value());
  EXPECT_EQ(third.refusal.kind, QuotaKind::kStreams);
  EXPECT_NE(third.refusal.message.find("--tenant-max-streams 2"), std::string::npos) << third.refusal.message;
  two.reset();  // destroying a lease frees its slot
  EXPECT_TRUE(q.Admit("a", 1).lease.has_value());
  one.lease->Finish(0);
  one.lease->Finish(0);  // once only
  TenantQuotas::Admission x = q.Admit("a", 1), y = q.Admit("a", 1), z = q.Admit("a", 1);
  EXPECT_TRUE(x.lease && y.lease);
  EXPECT_FALSE(z.lease.has_value()) << "a second Finish must not free a second slot";
}

TEST_F(TenantQuotaTest, NoQuotasAdmitEverythingAndBadOptionsAreRefused) {
  TenantQuotas q = Make({});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(q.Admit("a", 100000).lease.has_value());
  EXPECT_FALSE((TenantQuotaOptions{.requests_per_second = -1}).Validate().ok());
  EXPECT_FALSE((TenantQuotaOptions{.request_burst = 5}).Validate().ok());
  EXPECT_FALSE((TenantQuotaOptions{.requests_per_second = 1, .request_burst = 0.5}).Validate().ok());
  EXPECT_TRUE((TenantQuotaOptions{.requests_per_second = 0.5}).Validate().ok());
}

}  // namespace
}  // namespace kvfleet::router
