#include "services/transport/wire/kv_tier_convert.h"

#include <gtest/gtest.h>

namespace kvfleet::transport {
namespace {

TEST(KvTierConvertTest, EveryTierRoundTripsAndAnUnknownValueIsNoTier) {
  for (KvTier tier : {KvTier::kDevice, KvTier::kHost, KvTier::kDisk}) {
    EXPECT_EQ(FromProto(ToProto(tier)), tier) << static_cast<int>(tier);
  }
  EXPECT_EQ(ToProto(KvTier::kHost), v1::KV_TIER_HOST);
  EXPECT_EQ(FromProto(static_cast<v1::KvTier>(17)), std::nullopt);
}

}  // namespace
}  // namespace kvfleet::transport
