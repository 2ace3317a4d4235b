#include "tools/load/report_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvfleet::load {
namespace {

LoadReport Report() {
  LoadReport r;
  r.concurrency = 8;
  r.requests = 10;
  r.completed = 9;
  r.errors = {{"UNAVAILABLE", 1}};
  r.wall_seconds = 2;
  r.generated_tokens = 90;
  r.requests_per_second = 4.5;
  r.output_tokens_per_second = 45;
  r.ttft.Add(0.010);
  r.ttft.Add(0.030);
  r.e2e.Add(1.0);
  return r;
}

TEST(ReportFormatTest, JsonHasEveryFieldInMilliseconds) {
  const nlohmann::json j = nlohmann::json::parse(FormatJson(Report()));
  EXPECT_EQ(j["concurrency"], 8);
  EXPECT_EQ(j["requests"], 10);
  EXPECT_EQ(j["completed"], 9);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["errors"]["UNAVAILABLE"], 1);
  EXPECT_EQ(j["output_tokens_per_second"], 45.0);
  EXPECT_EQ(j["ttft_ms"]["count"], 2);
  EXPECT_NEAR(j["ttft_ms"]["p50"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(j["ttft_ms"]["p99"].get<double>(), 30.0, 1e-9);
  EXPECT_NEAR(j["ttft_ms"]["mean"].get<double>(), 20.0, 1e-9);
  EXPECT_TRUE(j["itl_ms"]["p50"].is_null()) << "no samples -> null";
  EXPECT_EQ(j["itl_ms"]["count"], 0);
  EXPECT_NEAR(j["e2e_ms"]["max"].get<double>(), 1000.0, 1e-9);
}

TEST(ReportFormatTest, TableRowLinesUpWithTheHeader) {
  const std::string header = FormatTableHeader();
  const std::string first = header.substr(0, header.find('\n'));
  const std::string row = FormatTableRow(Report());
  EXPECT_EQ(row.back(), '\n');
  EXPECT_EQ(row.size() - 1, first.size());
  EXPECT_NE(row.find("10.00"), std::string::npos) << row;  // ttft p50 in ms
  EXPECT_NE(row.find(" -"), std::string::npos) << "empty ITL prints '-': " << row;
}

}  // namespace
}  // namespace kvfleet::load
