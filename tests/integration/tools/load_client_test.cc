// `kvfleet load` against a real worker: every request completes, and the
// numbers it reports agree with what the worker counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/child_process.h"

namespace kvfleet::testing {
namespace {

TEST(LoadClientTest, DrivesConcurrentStreamsAndReportsOneRowPerLevel) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start().ok());
  auto client = ChildProcess::Start(KVFLEET_CLI_BINARY,
                                    {"load", "--target", harness.worker().address(), "--concurrency", "1,4",
                                     "--requests", "8", "--prompt-tokens", "24", "--shared-prefix-tokens", "16",
                                     "--max-tokens", "6", "--ignore-eos", "--warmup", "1", "--json"});
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::StatusOr<int> exit_code = (*client)->Wait(absl::Seconds(120));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  ASSERT_EQ(*exit_code, 0);

  std::vector<nlohmann::json> rows;
  for (const std::string& line : (*client)->StdoutLines()) {
    if (!line.empty() && line[0] == '{') rows.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(rows.size(), 2u);
  int64_t generated = 0, prompt = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& r = rows[i];
    EXPECT_EQ(r["concurrency"], i == 0 ? 1 : 4);
    EXPECT_EQ(r["requests"], 8);
    EXPECT_EQ(r["completed"], 8);
    EXPECT_EQ(r["failed"], 0);
    EXPECT_EQ(r["generated_tokens"], 8 * 6);
    EXPECT_EQ(r["prompt_tokens"], 8 * 24);
    EXPECT_EQ(r["ttft_ms"]["count"], 8);
    EXPECT_EQ(r["itl_ms"]["count"], 8 * 5);
    EXPECT_GT(r["output_tokens_per_second"].get<double>(), 0.0);
    EXPECT_LE(r["ttft_ms"]["p50"].get<double>(), r["e2e_ms"]["p50"].get<double>());
    // The shared prefix holds one full 16-token block: every request after
    // the first of its level finds it cached.
    EXPECT_GE(r["cached_prompt_tokens"].get<int64_t>(), 16 * 4) << r.dump();
    generated += r["generated_tokens"].get<int64_t>();
    prompt += r["prompt_tokens"].get<int64_t>();
  }
  auto metrics = harness.ScrapeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // One warm-up request comes on top.
  EXPECT_EQ(metrics->Value("kvfleet_worker_generated_tokens_total"), generated + 6);
  EXPECT_EQ(metrics->Value("kvfleet_worker_prompt_tokens_total"), prompt + 24);
}

}  // namespace
}  // namespace kvfleet::testing
