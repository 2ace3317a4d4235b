#include "services/transport/transport_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvfleet::transport {
namespace {

using ::testing::HasSubstr;

const TransportOptions kDefaults{.listen = "127.0.0.1:50051", .metrics_port = 9464};

absl::StatusOr<TransportOptions> Parse(const std::vector<std::string>& args) {
  absl::StatusOr<flags::Flags> f = flags::Flags::Parse(args, WithTransportFlags({"model"}), WithTransportSwitches({}));
  if (!f.ok()) return f.status();
  return ParseTransportOptions(*f, kDefaults);
}

TEST(TransportOptionsTest, DefaultsStandForAbsentFlags) {
  absl::StatusOr<TransportOptions> o = Parse({"--model", "m.gguf"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "127.0.0.1:50051");
  EXPECT_EQ(o->metrics_host, "0.0.0.0");
  EXPECT_EQ(o->metrics_port, 9464);
  EXPECT_EQ(o->health_port, -1) << "no health port unless asked";
  EXPECT_EQ(o->log_level, "info");
  EXPECT_TRUE(o->reflection);
  EXPECT_FALSE(o->tls.serves_tls());
}

TEST(TransportOptionsTest, ReadsEverySharedFlag) {
  absl::StatusOr<TransportOptions> o =
      Parse({"--listen", "0.0.0.0:1", "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--health-port", "0",
             "--log-level", "debug", "--no-reflection"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "0.0.0.0:1");
  EXPECT_EQ(o->metrics_host, "127.0.0.1");
  EXPECT_EQ(o->metrics_port, 0);
  EXPECT_EQ(o->health_port, 0);
  EXPECT_EQ(o->log_level, "debug");
  EXPECT_FALSE(o->reflection);
}

TEST(TransportOptionsTest, PortsOutOfRangeAreRefusedByName) {
  EXPECT_THAT(Parse({"--health-port", "70000"}).status().message(), HasSubstr("--health-port 70000"));
  EXPECT_THAT(Parse({"--health-port", "-1"}).status().message(), HasSubstr("--health-port -1"));
  EXPECT_THAT(Parse({"--metrics-port", "65536"}).status().message(), HasSubstr("--metrics-port 65536"));
}

TEST(TransportOptionsTest, UsageShowsTheServicesDefaultsAndReadinessName) {
  const std::string usage = TransportUsage(kDefaults, "kvfleet.v1.Worker");
  for (const char* text : {"--listen", "127.0.0.1:50051", "--metrics-port", "9464", "--metrics-host", "--health-port",
                           "kvfleet.v1.Worker", "liveness", "--log-level"}) {
    EXPECT_THAT(usage, HasSubstr(text));
  }
}

}  // namespace
}  // namespace kvfleet::transport
