#include "tests/testing/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvfleet::testing {
namespace {

// Shaped like prometheus-cpp's TextSerializer output.
constexpr char kScrape[] = R"(# HELP kvfleet_requests_total Requests finished, by status.
# TYPE kvfleet_requests_total counter
kvfleet_requests_total{status="ok"} 12
kvfleet_requests_total{status="error",reason="say \"hi\"\\n"} 3
# HELP kvfleet_kv_usage KV cache blocks in use.
# TYPE kvfleet_kv_usage gauge
kvfleet_kv_usage 0.25
# TYPE kvfleet_ttft_seconds histogram
kvfleet_ttft_seconds_count 4
kvfleet_ttft_seconds_sum 0.75
kvfleet_ttft_seconds_bucket{le="0.1"} 1
kvfleet_ttft_seconds_bucket{le="0.5"} 3
kvfleet_ttft_seconds_bucket{le="+Inf"} 4
kvfleet_odd{a="x",b="y",} NaN 1700000000000
kvfleet_neg -Inf
# TYPE exposer_request_latencies summary
exposer_request_latencies{quantile="0.5"} Nan
kvfleet_big 1.5e+06
)";

TEST(PrometheusTextTest, ParsesARealisticScrape) {
  absl::StatusOr<PrometheusScrape> scrape = PrometheusScrape::Parse(kScrape);
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(scrape->samples().size(), 12u);
  EXPECT_EQ(scrape->Value("kvfleet_requests_total", {{"status", "ok"}}), 12.0);
  EXPECT_EQ(scrape->Value("kvfleet_requests_total", {{"status", "error"}, {"reason", "say \"hi\"\\n"}}), 3.0);
  EXPECT_EQ(scrape->Value("kvfleet_requests_total"), std::nullopt) << "labels must match exactly";
  EXPECT_EQ(scrape->Sum("kvfleet_requests_total"), 15.0);
  EXPECT_EQ(scrape->Value("kvfleet_kv_usage"), 0.25);
  EXPECT_EQ(scrape->Value("kvfleet_big"), 1.5e6);
  EXPECT_EQ(scrape->Sum("kvfleet_missing"), 0.0);
}

TEST(PrometheusTextTest, HistogramSamplesKeepTheirSuffixes) {
  PrometheusScrape scrape = *PrometheusScrape::Parse(kScrape);
  EXPECT_EQ(scrape.Type("kvfleet_ttft_seconds"), "histogram");
  EXPECT_EQ(scrape.Type("kvfleet_requests_total"), "counter");
  EXPECT_EQ(scrape.Type("kvfleet_kv_usage"), "gauge");
  EXPECT_EQ(scrape.Type("kvfleet_odd"), std::nullopt);
  EXPECT_EQ(scrape.Value("kvfleet_ttft_seconds_count"), 4.0);
  EXPECT_EQ(scrape.Value("kvfleet_ttft_seconds_sum"), 0.75);
  EXPECT_EQ(scrape.Value("kvfleet_ttft_seconds_bucket", {{"le", "0.5"}}), 3.0);
  EXPECT_EQ(scrape.Value("kvfleet_ttft_seconds_bucket", {{"le", "+Inf"}}), 4.0);
}

TEST(PrometheusTextTest, SpecialValuesAndTimestamps) {
  PrometheusScrape scrape = *PrometheusScrape::Parse(kScrape);
  std::optional<double> odd = scrape.Value("kvfleet_odd", {{"a", "x"}, {"b", "y"}});
  ASSERT_TRUE(odd.has_value());
  EXPECT_TRUE(std::isnan(*odd));
  EXPECT_EQ(scrape.Value("kvfleet_neg"), -INFINITY);
  std::optional<double> nan = scrape.Value("exposer_request_latencies", {{"quantile", "0.5"}});
  ASSERT_TRUE(nan.has_value());
  EXPECT_TRUE(std::isnan(*nan)) << "prometheus-cpp's spelling";
}

TEST(PrometheusTextTest, MalformedLinesNameTheLine) {
  for (const char* bad : {"x{a=\"1\" 2", "x{a=1} 2", "x{a=\"1\"} abc", "x", "x 1 2 3", "{a=\"1\"} 2"}) {
    absl::StatusOr<PrometheusScrape> scrape = PrometheusScrape::Parse(std::string("# TYPE x gauge\n") + bad);
    ASSERT_FALSE(scrape.ok()) << bad;
    EXPECT_NE(scrape.status().message().find("line 2"), std::string::npos) << scrape.status();
  }
}

}  // namespace
}  // namespace kvfleet::testing
