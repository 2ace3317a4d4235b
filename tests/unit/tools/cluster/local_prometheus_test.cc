#include "tools/cluster/local_prometheus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "tests/testing/http_get.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PrometheusConfigTest, LabelsEveryTargetAsTheChartsRelabelingDoes) {
  const std::string config =
      PrometheusConfig({{.address = "0.0.0.0:9466", .pod = "router", .component = "router"},
                        {.address = "127.0.0.1:9464", .pod = "worker-0", .component = "worker", .model = "SmolLM2"},
                        {.address = "127.0.0.1:9465", .pod = "worker-1", .component = "worker", .model = "coder"}},
                       {.scrape_interval_seconds = 1, .rule_files = {"/r/alerts.yaml"}});
  EXPECT_THAT(config, HasSubstr("scrape_interval: 1s"));
  EXPECT_THAT(config, HasSubstr("evaluation_interval: 1s"));
  EXPECT_THAT(config, HasSubstr("rule_files:\n  - \"/r/alerts.yaml\""));
  EXPECT_THAT(config, HasSubstr("targets: [\"127.0.0.1:9466\"]")) << "a wildcard bind is scraped on loopback";
  EXPECT_THAT(config, HasSubstr("targets: [\"127.0.0.1:9464\"]"));
  for (const char* label : {"namespace: \"local\"", "pod: \"router\"", "pod: \"worker-0\"", "component: \"worker\"",
                            "model: \"SmolLM2\"", "model: \"coder\""}) {
    EXPECT_THAT(config, HasSubstr(label));
  }
  // The router serves every model: its series carry their own model label,
  // which a target label would rename to exported_model.
  EXPECT_THAT(config, HasSubstr("pod: \"router\"\n          component: \"router\"\n      - targets"));
}

TEST(PrometheusConfigTest, NoRuleFilesNoRuleSection) {
  EXPECT_THAT(PrometheusConfig({}, {}), Not(HasSubstr("rule_files")));
}

TEST(PrometheusConfigTest, QuotesLabelValues) {
  EXPECT_THAT(PrometheusConfig({{.address = "h:1", .pod = "a\"b", .component = "worker"}}, {}),
              HasSubstr("pod: \"a\\\"b\""));
}

bool HavePrometheus() { return std::system("command -v prometheus >/dev/null 2>&1") == 0; }

TEST(LocalPrometheusTest, StartsServesItsApiAndStops) {
  if (!HavePrometheus()) GTEST_SKIP() << "no prometheus binary on PATH (scripts/setup.sh installs Debian's)";
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<LocalPrometheus>> prom =
      LocalPrometheus::Start({.config = PrometheusConfig({}, {}), .dir = dir.path(), .port = 0});
  ASSERT_TRUE(prom.ok()) << prom.status();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi((*prom)->url().substr((*prom)->url().rfind(':') + 1), &port));
  absl::StatusOr<std::string> ready = testing::HttpGet("127.0.0.1", port, "/-/ready", absl::Seconds(5));
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_THAT(*ready, HasSubstr("Ready"));
  EXPECT_TRUE((*prom)->Stop().ok());
}

TEST(LocalPrometheusTest, ABadRuleFileFailsTheStartNamingIt) {
  if (!HavePrometheus()) GTEST_SKIP() << "no prometheus binary on PATH (scripts/setup.sh installs Debian's)";
  testing::TempDir dir;
  const std::string rules = dir.path() + "/broken.yaml";
  std::FILE* f = std::fopen(rules.c_str(), "w");
  std::fputs("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(x[\n", f);
  std::fclose(f);
  absl::StatusOr<std::unique_ptr<LocalPrometheus>> prom =
      LocalPrometheus::Start({.config = PrometheusConfig({}, {.rule_files = {rules}}), .dir = dir.path(), .port = 0});
  ASSERT_FALSE(prom.ok());
  EXPECT_THAT(prom.status().message(), HasSubstr("broken.yaml"));
}

}  // namespace
}  // namespace kvfleet::cluster
