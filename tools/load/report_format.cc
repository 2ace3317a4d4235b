#include "tools/load/report_format.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace kvfleet::load {

namespace {

constexpr double kPercentiles[] = {50, 90, 99};

// A millisecond value in a fixed-width column; "-" for no samples.
std::string Ms(double seconds) {
  char buf[32];
  if (std::isnan(seconds)) {
    std::snprintf(buf, sizeof(buf), " %9s", "-");
  } else {
    std::snprintf(buf, sizeof(buf), " %9.2f", seconds * 1e3);
  }
  return buf;
}

nlohmann::ordered_json SummaryMs(const LatencyStats& stats) {
  // nlohmann writes NaN (the summaries of no samples) as null.
  nlohmann::ordered_json j = {{"count", stats.count()}, {"mean", stats.Mean() * 1e3}, {"min", stats.Min() * 1e3}};
  for (double p : kPercentiles) j["p" + std::to_string(static_cast<int>(p))] = stats.Percentile(p) * 1e3;
  j["max"] = stats.Max() * 1e3;
  return j;
}

}  // namespace

std::string FormatTableHeader() {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%5s %7s %7s %6s %9s %9s %10s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "conc", "reqs",
                "ok", "err", "wall_s", "req/s", "out_tok/s", "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p90",
                "itl_p99", "e2e_p50", "e2e_p90", "e2e_p99");
  return std::string(buf) + std::string(std::string(buf).size() - 1, '-') + "\n";
}

std::string FormatTableRow(const LoadReport& r) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%5d %7lld %7lld %6lld %9.2f %9.2f %10.1f", r.concurrency,
                static_cast<long long>(r.requests), static_cast<long long>(r.completed),
                static_cast<long long>(r.failed()), r.wall_seconds, r.requests_per_second, r.output_tokens_per_second);
  std::string row = buf;
  for (const LatencyStats* stats : {&r.ttft, &r.itl, &r.e2e}) {
    for (double p : kPercentiles) row += Ms(stats->Percentile(p));
  }
  return row + "\n";
}

std::string FormatJson(const LoadReport& r) {
  nlohmann::ordered_json j = {{"concurrency", r.concurrency},
                              {"requests", r.requests},
                              {"completed", r.completed},
                              {"failed", r.failed()},
                              {"errors", r.errors},
                              {"wall_seconds", r.wall_seconds},
                              {"requests_per_second", r.requests_per_second},
                              {"output_tokens_per_second", r.output_tokens_per_second},
                              {"prompt_tokens", r.prompt_tokens},
                              {"cached_prompt_tokens", r.cached_prompt_tokens},
                              {"generated_tokens", r.generated_tokens},
                              {"ttft_ms", SummaryMs(r.ttft)},
                              {"itl_ms", SummaryMs(r.itl)},
                              {"e2e_ms", SummaryMs(r.e2e)}};
  return j.dump();
}

}  // namespace kvfleet::load
