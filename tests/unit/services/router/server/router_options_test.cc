// The router's command line: defaults, the one-of discovery rule, policies
// and the ranges each flag accepts.
#include "services/router/server/router_options.h"

#include <gtest/gtest.h>

namespace kvfleet::router {
namespace {

TEST(RouterOptionsTest, DefaultsWithACacheManager) {
  absl::StatusOr<RouterOptions> o = ParseRouterOptions({"--model", "m.gguf", "--cachemanager", "127.0.0.1:50050"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->transport.listen, "127.0.0.1:50060");
  EXPECT_EQ(o->transport.metrics_port, 9466);
  EXPECT_EQ(o->placement.policy, Policy::kPrefixAware);
  EXPECT_EQ(o->max_attempts, 3);
  EXPECT_TRUE(o->workers.empty());
  EXPECT_TRUE(o->http_listen.empty());  // the HTTP port is off unless asked for
  EXPECT_EQ(o->http_request_timeout, std::chrono::minutes(10));
  EXPECT_TRUE(o->served_model_name.empty());
}

TEST(RouterOptionsTest, TheHttpPortAndTheServedName) {
  absl::StatusOr<RouterOptions> o =
      ParseRouterOptions({"--model", "m", "--workers", "a:1", "--http-listen", "0.0.0.0:8000", "--http-request-timeout",
                          "1500", "--served-model-name", "smollm2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->http_listen, "0.0.0.0:8000");
  EXPECT_EQ(o->http_request_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o->served_model_name, "smollm2");
}

TEST(RouterOptionsTest, StaticWorkersAndAPolicy) {
  absl::StatusOr<RouterOptions> o =
      ParseRouterOptions({"--model", "m.gguf", "--workers", "a:1, b:2", "--policy", "round_robin"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->workers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(o->placement.policy, Policy::kRoundRobin);
}

TEST(RouterOptionsTest, PlacementKnobs) {
  absl::StatusOr<RouterOptions> o =
      ParseRouterOptions({"--model", "m", "--workers", "a:1", "--prefill-weight", "2", "--decode-weight", "0.5",
                          "--decision-memory", "30000", "--in-flight-window", "0", "--affinity-guard-margin", "4"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->placement.prefill_weight, 2.0);
  EXPECT_EQ(o->placement.decode_weight, 0.5);
  EXPECT_EQ(o->placement.decision_memory, std::chrono::milliseconds(30000));
  EXPECT_EQ(o->placement.in_flight_window, std::chrono::milliseconds(0));
  EXPECT_EQ(o->placement.affinity_guard_margin, 4);
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--decode-weight", "-1"}).ok());
}

TEST(RouterOptionsTest, SplitKnobs) {
  absl::StatusOr<RouterOptions> o = ParseRouterOptions({"--model", "m", "--workers", "a:1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->split.enabled);
  EXPECT_EQ(o->split.min_uncached_tokens, 2048);
  EXPECT_FALSE(o->split_stream_first_token) << "by default a split's first token waits for the decode worker";
  o = ParseRouterOptions({"--model", "m", "--workers", "a:1", "--no-split", "--split-min-uncached-tokens", "512",
                          "--split-stream-first-token"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->split.enabled);
  EXPECT_EQ(o->split.min_uncached_tokens, 512);
  EXPECT_TRUE(o->split_stream_first_token);
}

TEST(RouterOptionsTest, WithoutAModelEveryModelIsLearntFromTheWorkers) {
  absl::StatusOr<RouterOptions> o = ParseRouterOptions({"--cachemanager", "x:1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->model_path.empty());
  // What only names the file's model is refused without one, saying where it goes instead.
  for (const char* flag : {"--model-id", "--served-model-name", "--chat-template"}) {
    const absl::Status s = ParseRouterOptions({"--cachemanager", "x:1", flag, "x"}).status();
    EXPECT_NE(s.message().find("needs --model"), absl::string_view::npos) << flag << ": " << s;
    EXPECT_NE(s.message().find("give the workers"), absl::string_view::npos) << s;
  }
}

TEST(RouterOptionsTest, BadCommandLinesAreRefused) {
  EXPECT_FALSE(ParseRouterOptions({"--model", "m"}).ok());  // no workers at all
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--cachemanager", "x:1", "--workers", "a:1"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--policy", "random"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--max-attempts", "0"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--probe-interval", "1"}).ok());
  EXPECT_FALSE(ParseRouterOptions({"--model", "m", "--workers", "a:1", "--http-request-timeout", "0"}).ok());
  EXPECT_FALSE(
      ParseRouterOptions({"--model", "m", "--workers", "a:1", "--http-request-timeout", "99999999999999"}).ok());
}

}  // namespace
}  // namespace kvfleet::router
