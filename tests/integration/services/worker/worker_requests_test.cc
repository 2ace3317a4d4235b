// Bad input and too much input: each gets a status a client can act on,
// and the worker keeps serving. Metrics count exactly what was sent.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "tests/integration/services/worker/worker_harness.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

struct MalformedCase {
  const char* name;
  std::function<void(v1::GenerateRequest&)> mutate;
  grpc::StatusCode code;
  std::vector<std::string> message_mentions;
};

TEST(WorkerRequestsTest, MalformedRequestsGetTheDocumentedStatusAndTheWorkerKeepsServing) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start().ok());
  const std::vector<MalformedCase> cases = {
      {"empty prompt", [](auto& r) { r.clear_prompt_token_ids(); }, grpc::StatusCode::INVALID_ARGUMENT, {"prompt"}},
      {"unknown token id", [](auto& r) { r.set_prompt_token_ids(1, 999999); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"999999", "vocabulary"}},
      {"negative token id", [](auto& r) { r.set_prompt_token_ids(0, -4); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"-4"}},
      {"negative max tokens", [](auto& r) { r.mutable_stopping()->set_max_tokens(-5); },
       grpc::StatusCode::INVALID_ARGUMENT, {"max_tokens", "-5"}},
      {"temperature below 0", [](auto& r) { r.mutable_sampling()->set_temperature(-0.5f); },
       grpc::StatusCode::INVALID_ARGUMENT, {"temperature"}},
      {"top_p above 1", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"top_p"}},
      {"10,000 stop ids",
       [](auto& r) {
         for (int i = 0; i < 10000; ++i) r.mutable_stopping()->add_stop_token_ids(5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"stop_token_ids", "10000"}},
      {"top_logprobs over 20",
       [](auto& r) {
         r.set_logprobs(true);
         r.set_top_logprobs(50);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"top_logprobs"}},
      {"prompt over the context (max_tokens unset)",
       [](auto& r) {
         r = TinyRequest(1, kTinyContext + 904, 0);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"5000", "4096"}},
      {"prompt + max_tokens over the context",
       [](auto& r) {
         r = TinyRequest(1, 4000, 200);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"4000", "200", "4096"}},
      {"oversized message",
       [](auto& r) {
         for (int i = 0; i < 600000; ++i) r.add_prompt_token_ids(300);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, {}},
  };
  for (const MalformedCase& c : cases) {
    v1::GenerateRequest r = TinyRequest(42, 8, 4);
    c.mutate(r);
    const StreamResult result = harness.Generate(r, milliseconds(30000));
    EXPECT_EQ(result.status.error_code(), c.code) << c.name << ": " << result.status.error_message();
    EXPECT_TRUE(result.tokens.empty()) << c.name;
    for (const std::string& word : c.message_mentions) {
      EXPECT_NE(result.status.error_message().find(word), std::string::npos)
          << c.name << ": the message should mention '" << word << "': " << result.status.error_message();
    }
    const StreamResult ok = harness.Generate(TinyRequest(43, 8, 4), milliseconds(30000));
    EXPECT_TRUE(ok.status.ok()) << "after " << c.name << ": " << ok.status.error_message();
    EXPECT_EQ(ok.tokens.size(), 4u) << "after " << c.name;
  }
  EXPECT_EQ(harness.Stats()->blocks_used(), 0);
}

// The limits table's flags on a real worker process, each value one over
// its (lowered) limit: the worker checks them itself, as it may be called
// without a router in front.
TEST(WorkerRequestsTest, LoweredLimitsAreEnforcedByTheWorkerProcessNamingTheFlag) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--max-priority", "3", "--max-request-id-bytes", "4", "--max-cache-salt-bytes", "4",
                             "--max-prompt-tokens", "16", "--max-output-tokens", "8", "--max-stop-token-ids", "1",
                             "--max-top-logprobs", "2", "--max-message-bytes", "2048"})
                  .ok());
  const std::vector<MalformedCase> cases = {
      {"priority", [](auto& r) { r.set_priority(4); }, grpc::StatusCode::INVALID_ARGUMENT, {"--max-priority"}},
      {"request_id", [](auto& r) { r.set_request_id("12345"); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"--max-request-id-bytes"}},
      {"cache_salt", [](auto& r) { r.set_cache_salt("12345"); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"--max-cache-salt-bytes"}},
      {"prompt tokens", [](auto& r) { r = TinyRequest(1, 17, 4); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"17 tokens", "--max-prompt-tokens"}},
      {"max_tokens", [](auto& r) { r.mutable_stopping()->set_max_tokens(9); }, grpc::StatusCode::INVALID_ARGUMENT,
       {"--max-output-tokens"}},
      {"stop ids",
       [](auto& r) {
         r.mutable_stopping()->add_stop_token_ids(5);
         r.mutable_stopping()->add_stop_token_ids(6);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"--max-stop-token-ids"}},
      {"top_logprobs",
       [](auto& r) {
         r.set_logprobs(true);
         r.set_top_logprobs(3);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"--max-top-logprobs"}},
      {"message bytes", [](auto& r) { r.set_request_id(std::string(2100, 'x')); }, grpc::StatusCode::RESOURCE_EXHAUSTED,
       {}},
  };
  for (const MalformedCase& c : cases) {
    v1::GenerateRequest r = TinyRequest(42, 8, 4);
    EXPECT_TRUE(harness.Generate(r, milliseconds(30000)).status.ok()) << "within the limits, before " << c.name;
    c.mutate(r);
    const StreamResult result = harness.Generate(r, milliseconds(30000));
    EXPECT_EQ(result.status.error_code(), c.code) << c.name << ": " << result.status.error_message();
    for (const std::string& word : c.message_mentions) {
      EXPECT_NE(result.status.error_message().find(word), std::string::npos)
          << c.name << ": the message should mention '" << word << "': " << result.status.error_message();
    }
  }
}

TEST(WorkerRequestsTest, OverloadAtTwiceTheQueueLimitEndsEveryRequestOkOrResourceExhausted) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--max-num-seqs", "4", "--max-waiting-requests", "8"}).ok());
  constexpr int kRequests = 2 * (4 + 8);
  std::vector<StreamResult> results(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] { results[i] = harness.Generate(TinyRequest(i, 16, 300), milliseconds(120000)); });
  }
  for (auto& c : clients) c.join();
  int ok = 0, exhausted = 0;
  for (int i = 0; i < kRequests; ++i) {
    const grpc::StatusCode code = results[i].status.error_code();
    ASSERT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "request " << i << " ended " << code << ": " << results[i].status.error_message();
    if (code == grpc::StatusCode::OK) {
      ++ok;
      EXPECT_EQ(results[i].tokens.size(), 300u);
    } else {
      ++exhausted;
      EXPECT_NE(results[i].status.error_message().find("waiting queue is full"), std::string::npos);
    }
  }
  EXPECT_GE(ok, 4 + 8) << "everything that fit should have been served";
  EXPECT_GE(exhausted, 1) << "twice the limit should overflow the queue";
  auto metrics = harness.ScrapeMetrics();
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->Value("kvfleet_worker_requests_rejected_total", {{"code", "resource_exhausted"}}), exhausted);
}

TEST(WorkerRequestsTest, ScrapedMetricsCountWhatWasSent) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start().ok());
  auto before = harness.ScrapeMetrics();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->Type("kvfleet_worker_requests_total"), "counter");
  EXPECT_EQ(before->Type("kvfleet_worker_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(before->Type("kvfleet_worker_kv_usage_ratio"), "gauge");

  int prompt_tokens = 0, generated = 0;
  const std::vector<std::pair<int, int>> shapes = {{5, 3}, {17, 9}, {33, 1}, {40, 12}, {8, 20}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const StreamResult r = harness.Generate(TinyRequest(100 + i, shapes[i].first, shapes[i].second));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    prompt_tokens += shapes[i].first;
    generated += shapes[i].second;
  }
  v1::GenerateRequest bad = TinyRequest(1, 4, 4);
  bad.mutable_sampling()->set_temperature(-1.0f);
  ASSERT_EQ(harness.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A stream's last message can reach the client before the engine publishes
  // the step's stats (the prefix-cache counters): scrape until they include
  // every prompt (or 10 s pass).
  auto m = harness.ScrapeMetrics();
  for (int i = 0; i < 100 && m.ok() && m->Value("kvfleet_worker_prefix_cache_queried_tokens_total") < prompt_tokens;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = harness.ScrapeMetrics();
  }
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->Value("kvfleet_worker_requests_total", {{"finish_reason", "length"}}), 5);
  EXPECT_EQ(m->Value("kvfleet_worker_requests_total", {{"finish_reason", "stop"}}), 0);
  EXPECT_EQ(m->Value("kvfleet_worker_requests_rejected_total", {{"code", "invalid_argument"}}), 1);
  EXPECT_EQ(m->Value("kvfleet_worker_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(m->Value("kvfleet_worker_generated_tokens_total"), generated);
  EXPECT_EQ(m->Value("kvfleet_worker_prefix_cache_queried_tokens_total"), prompt_tokens);
  EXPECT_EQ(m->Value("kvfleet_worker_time_to_first_token_seconds_count"), 5);
  EXPECT_EQ(m->Value("kvfleet_worker_e2e_request_latency_seconds_count"), 5);
  EXPECT_EQ(m->Value("kvfleet_worker_queue_time_seconds_count"), 5);
  EXPECT_EQ(m->Value("kvfleet_worker_inter_token_latency_seconds_count"), generated - 5);
  // Speculation (n-gram, on by default) also computes the guesses it drafts;
  // the rejected ones are the only extra work.
  const double rejected =
      m->Sum("kvfleet_worker_spec_draft_tokens_total") - m->Sum("kvfleet_worker_spec_accepted_tokens_total");
  EXPECT_EQ(m->Value("kvfleet_worker_engine_step_tokens_sum"), prompt_tokens + generated - 5 + rejected)
      << "every prompt token and every generated token but the last of each request is computed once, and each "
         "rejected guess once";
  auto stats = harness.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(m->Value("kvfleet_worker_kv_blocks_total"), stats->blocks_total());
  EXPECT_EQ(m->Value("kvfleet_worker_engine_steps_total"), stats->steps());
}

}  // namespace
}  // namespace kvfleet::testing
