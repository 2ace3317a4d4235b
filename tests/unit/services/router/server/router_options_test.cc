// The router's command line: defaults, the one-of discovery rule, policies
// and the ranges each flag accepts.
#include "services/router/server/router_options.h"

#include <gtest/gtest.h>

namespace kvfleet::router {
namespace {

TEST(RouterOptionsTest, DefaultsWithACacheManager) {
  absl::StatusOr<RouterOptions> o = ParseRouterOptions({"--model", "m.gguf", "--cachemanager", "127.0.0.1:50050"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "127.0.0.1:50060");
  EXPECT_EQ(o->metrics_port, 9466);
  EXPECT_EQ(o->placement.policy, Policy::kPrefixAware);
  EXPECT_EQ(o->max_attempts, 3);
  EXPECT_TRUE(o->workers.empty());
}

TEST(RouterOptionsTest, StaticWorkersAndAPolicy) {
  absl::StatusOr<RouterOptions> o =
      ParseRouterOptions({"--model", "m.gguf", "--workers", "a:1, b:2", "--policy", "round_robin"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->workers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(o->placement.policy, Policy::kRoundRobin);
}

TEST(RouterOptionsTest, BadCommandLinesAreRefused) {
  EXPECT_FALSE(ParseRouterOptions({"--cachemanager", "x:1"}).ok());  // no model
  EXPECT_FALSE(ParseRouterOptions({"--model", "m"}).ok());           // no workers at all
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--cachemanager", "x:1", "--workers", "a:1"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--policy", "random"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--max-attempts", "0"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--probe-interval", "1"}).ok());
}

}  // namespace
}  // namespace kvfleet::router
