#include "services/worker/server/worker_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "tests/testing/prometheus_text.h"

namespace kvfleet::worker {
namespace {

using ::kvfleet::testing::PrometheusScrape;

PrometheusScrape Scrape(const prometheus::Collectable& c) {
  const std::string text = prometheus::TextSerializer().Serialize(c.Collect());
  auto scrape = PrometheusScrape::Parse(text);
  EXPECT_TRUE(scrape.ok()) << scrape.status() << "\n" << text;
  return *scrape;
}

TEST(WorkerMetricsTest, RequestEventsLandInTheirCounters) {
  WorkerMetrics m;
  m.RecordFinished(engine::FinishReason::kLength, {.prompt_tokens = 10, .cached_prompt_tokens = 4, .generated_tokens = 3},
                   0.5, 0.01);
  m.RecordFinished(engine::FinishReason::kCancelled, {.prompt_tokens = 2}, 0.2, -1.0);
  m.RecordFirstToken(0.05);
  m.RecordInterToken(0.01);
  m.RecordRejected("invalid_argument");
  m.OnStep({.seconds = 0.003, .num_tokens = 12});
  const PrometheusScrape s = Scrape(*m.registry());
  EXPECT_EQ(s.Value("kvfleet_worker_requests_total", {{"finish_reason", "length"}}), 1);
  EXPECT_EQ(s.Value("kvfleet_worker_requests_total", {{"finish_reason", "cancelled"}}), 1);
  EXPECT_EQ(s.Value("kvfleet_worker_requests_total", {{"finish_reason", "stop"}}), 0);
  EXPECT_EQ(s.Value("kvfleet_worker_prompt_tokens_total"), 12);
  EXPECT_EQ(s.Value("kvfleet_worker_cached_prompt_tokens_total"), 4);
  EXPECT_EQ(s.Value("kvfleet_worker_generated_tokens_total"), 3);
  EXPECT_EQ(s.Value("kvfleet_worker_requests_rejected_total", {{"code", "invalid_argument"}}), 1);
  EXPECT_EQ(s.Value("kvfleet_worker_e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(s.Value("kvfleet_worker_queue_time_seconds_count"), 1) << "never-scheduled requests have no queue time";
  EXPECT_EQ(s.Value("kvfleet_worker_engine_step_tokens_sum"), 12);
  EXPECT_EQ(s.Type("kvfleet_worker_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(s.Type("kvfleet_worker_requests_total"), "counter");
}

TEST(WorkerMetricsTest, EngineStatsAreReadAtScrapeTime) {
  engine::EngineStats stats{.running = 2, .waiting = 1, .blocks_total = 100, .blocks_used = 25, .blocks_cached = 5,
                            .blocks_free = 75, .prefix_queried_tokens = 64, .prefix_hit_tokens = 32};
  EngineStatsCollector collector([&] { return stats; });
  PrometheusScrape s = Scrape(collector);
  EXPECT_EQ(s.Value("kvfleet_worker_requests_running"), 2);
  EXPECT_EQ(s.Value("kvfleet_worker_kv_blocks", {{"state", "used"}}), 25);
  EXPECT_EQ(s.Value("kvfleet_worker_kv_blocks", {{"state", "cached"}}), 5);
  EXPECT_EQ(s.Value("kvfleet_worker_kv_blocks", {{"state", "empty"}}), 70);
  EXPECT_DOUBLE_EQ(*s.Value("kvfleet_worker_kv_usage_ratio"), 0.25);
  EXPECT_EQ(s.Value("kvfleet_worker_prefix_cache_hit_tokens_total"), 32);
  EXPECT_EQ(s.Type("kvfleet_worker_prefix_cache_hit_tokens_total"), "counter");
  stats.blocks_used = 0;
  s = Scrape(collector);
  EXPECT_EQ(s.Value("kvfleet_worker_kv_blocks", {{"state", "used"}}), 0);
}

}  // namespace
}  // namespace kvfleet::worker
