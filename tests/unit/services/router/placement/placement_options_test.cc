// PlacementOptions::Validate and the policy names the router's flag takes.
#include "services/router/placement/placement_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "services/router/placement/decision.h"

namespace kvfleet::router {
namespace {

TEST(PlacementOptionsTest, PolicyNamesRoundTrip) {
  for (Policy p : {Policy::kPrefixAware, Policy::kLeastLoaded, Policy::kRoundRobin}) {
    absl::StatusOr<Policy> parsed = ParsePolicy(PolicyName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(PolicyName(Policy::kPrefixAware), "prefix_aware");
  EXPECT_EQ(PolicyName(Policy::kLeastLoaded), "least_loaded");
  EXPECT_EQ(PolicyName(Policy::kRoundRobin), "round_robin");
}

TEST(PlacementOptionsTest, UnknownPolicyNamesTheChoices) {
  absl::StatusOr<Policy> p = ParsePolicy("random");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("\"random\""), std::string::npos);
  EXPECT_NE(p.status().message().find("prefix_aware"), std::string::npos);
  EXPECT_FALSE(ParsePolicy("").ok());
  EXPECT_FALSE(ParsePolicy("Prefix_Aware").ok());
}

TEST(PlacementOptionsTest, DefaultsAreValidAndPrefixAware) {
  PlacementOptions o;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  EXPECT_EQ(o.policy, Policy::kPrefixAware);
  EXPECT_EQ(o.decision_memory, std::chrono::seconds(5));
  EXPECT_TRUE(o.affinity_guard);
}

TEST(PlacementOptionsTest, OffSwitchesAreValid) {
  PlacementOptions o{.prefill_weight = 0, .decode_weight = 0, .kv_pressure_threshold = 1.0, .kv_pressure_weight = 0};
  o.decision_memory = std::chrono::milliseconds(0);
  o.in_flight_window = std::chrono::milliseconds(0);
  o.affinity_guard_margin = 0;
  o.affinity_guard_ratio = 1.0;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(PlacementOptionsTest, RejectsEachBadField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string field;
    std::function<void(PlacementOptions&)> set;
  };
  const std::vector<Case> cases = {
      {"prefill_weight", [](PlacementOptions& o) { o.prefill_weight = -1; }},
      {"prefill_weight", [&](PlacementOptions& o) { o.prefill_weight = nan; }},
      {"decode_weight", [&](PlacementOptions& o) { o.decode_weight = inf; }},
      {"kv_pressure_weight", [](PlacementOptions& o) { o.kv_pressure_weight = -0.5; }},
      {"kv_pressure_threshold", [](PlacementOptions& o) { o.kv_pressure_threshold = 0; }},
      {"kv_pressure_threshold", [](PlacementOptions& o) { o.kv_pressure_threshold = 1.01; }},
      {"kv_pressure_threshold", [&](PlacementOptions& o) { o.kv_pressure_threshold = nan; }},
      {"decision_memory", [](PlacementOptions& o) { o.decision_memory = std::chrono::milliseconds(-1); }},
      {"memory_max_blocks", [](PlacementOptions& o) { o.memory_max_blocks = 0; }},
      {"in_flight_window", [](PlacementOptions& o) { o.in_flight_window = std::chrono::milliseconds(-5); }},
      {"max_in_flight", [](PlacementOptions& o) { o.max_in_flight = 0; }},
      {"affinity_guard_margin", [](PlacementOptions& o) { o.affinity_guard_margin = -1; }},
      {"affinity_guard_ratio", [](PlacementOptions& o) { o.affinity_guard_ratio = 0.99; }},
      {"affinity_guard_ratio", [&](PlacementOptions& o) { o.affinity_guard_ratio = nan; }},
      {"policy", [](PlacementOptions& o) { o.policy = static_cast<Policy>(7); }},
  };
  for (const Case& c : cases) {
    PlacementOptions o;
    c.set(o);
    absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << c.field << ": " << s;
  }
}

TEST(PlacementOptionsTest, ReasonNamesAreDistinctMetricLabels) {
  const std::vector<Reason> all = {Reason::kPrefixHit,     Reason::kRecentDecision, Reason::kCold,
                                   Reason::kAffinityGuard, Reason::kLeastLoaded,    Reason::kRoundRobin};
  std::vector<std::string> names;
  for (Reason r : all) names.emplace_back(ReasonName(r));
  EXPECT_EQ(names, (std::vector<std::string>{"prefix_hit", "recent_decision", "cold", "affinity_guard", "least_loaded",
                                             "round_robin"}));
}

}  // namespace
}  // namespace kvfleet::router
