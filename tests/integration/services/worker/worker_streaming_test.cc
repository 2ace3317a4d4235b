// The worker as a client sees it, over real gRPC on loopback: concurrent
// streams equal to solo runs, cancellation and deadlines free KV blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/service_process.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

class WorkerStreamingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(harness_.Start({"--health-port", "0"}).ok()); }

  // Waits until the worker holds no request and no block, then checks that
  // the metric agrees with GetStats.
  void ExpectIdleBaseline(int32_t baseline_blocks_used) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto s = harness_.Stats();
          return s.ok() && s->blocks_used() == baseline_blocks_used && s->running() == 0 && s->waiting() == 0;
        },
        milliseconds(30000)))
        << "blocks_used never returned to " << baseline_blocks_used << ": " << harness_.Stats()->DebugString();
    auto metrics = harness_.ScrapeMetrics();
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_EQ(metrics->Value("kvfleet_worker_kv_blocks", {{"state", "used"}}), baseline_blocks_used);
    EXPECT_EQ(metrics->Value("kvfleet_worker_requests_running"), 0);
  }

  WorkerHarness harness_;
};

TEST_F(WorkerStreamingTest, SixtyFourConcurrentStreamsEqualRunningEachAlone) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 64; ++i) {
    v1::GenerateRequest r = TinyRequest(i, 4 + i % 37, 8 + i % 25);
    if (i % 2 == 1) {  // seeded sampling must be as reproducible as greedy
      r.mutable_sampling()->set_temperature(0.8f);
      r.mutable_sampling()->set_top_k(40);
      r.mutable_sampling()->set_seed(1000 + i);
    }
    requests.push_back(r);
  }
  std::vector<StreamResult> alone;
  auto stub = harness_.Stub();
  for (const auto& r : requests) alone.push_back(harness_.Generate(*stub, r));

  std::vector<StreamResult> together(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] { together[i] = harness_.Generate(requests[i]); });
  }
  for (auto& c : clients) c.join();

  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(alone[i].status.ok()) << i << ": " << alone[i].status.error_message();
    ASSERT_TRUE(together[i].status.ok()) << i << ": " << together[i].status.error_message();
    EXPECT_EQ(alone[i].tokens.size(), static_cast<size_t>(requests[i].stopping().max_tokens())) << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].finish_reason, v1::FINISH_REASON_LENGTH) << i;
    EXPECT_EQ(together[i].usage.generated_tokens(), static_cast<int>(alone[i].tokens.size())) << i;
  }
  ExpectIdleBaseline(0);
}

TEST_F(WorkerStreamingTest, HundredCancelledStreamsReturnBlocksToTheIdleBaseline) {
  const int32_t baseline = harness_.Stats()->blocks_used();
  std::vector<StreamResult> results(100);
  std::vector<std::thread> clients;
  for (int i = 0; i < 100; ++i) {
    clients.emplace_back([&, i] {
      results[i] = harness_.Generate(TinyRequest(500 + i, 20 + i % 30, 3000), std::nullopt,
                                     [](const StreamResult& r) { return r.tokens.size() >= 2; });
    });
  }
  for (auto& c : clients) c.join();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(results[i].status.error_code(), grpc::StatusCode::CANCELLED) << i << ": " << results[i].status.error_message();
    EXPECT_GE(results[i].tokens.size(), 2u) << i;
    EXPECT_LT(results[i].tokens.size(), 3000u) << "request " << i << " finished before it was cancelled";
  }
  ExpectIdleBaseline(baseline);
  auto metrics = harness_.ScrapeMetrics();
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->Value("kvfleet_worker_requests_total", {{"finish_reason", "cancelled"}}), 100);
}

TEST_F(WorkerStreamingTest, DeadlinePassingMidStreamEndsDeadlineExceededAndFreesBlocks) {
  const StreamResult r = harness_.Generate(TinyRequest(7, 10, kTinyContext - 10), milliseconds(400));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  EXPECT_GT(r.tokens.size(), 0u) << "the deadline should pass mid-stream, after the first tokens";
  EXPECT_LT(r.tokens.size(), static_cast<size_t>(kTinyContext - 10));
  ExpectIdleBaseline(0);
  auto metrics = harness_.ScrapeMetrics();
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->Value("kvfleet_worker_requests_total", {{"finish_reason", "cancelled"}}), 1);
}

TEST_F(WorkerStreamingTest, LogprobsTravelWithTheirTokens) {
  v1::GenerateRequest r = TinyRequest(9, 12, 6);
  r.set_logprobs(true);
  r.set_top_logprobs(2);
  auto stub = harness_.Stub();
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, r);
  v1::GenerateResponse response;
  int tokens = 0;
  while (reader->Read(&response)) {
    ASSERT_EQ(response.logprobs_size(), response.token_ids_size());
    for (int i = 0; i < response.token_ids_size(); ++i) {
      EXPECT_EQ(response.logprobs(i).token_id(), response.token_ids(i));
      EXPECT_LE(response.logprobs(i).logprob(), 0.0f);
      ASSERT_EQ(response.logprobs(i).top_size(), 2);
      EXPECT_EQ(response.logprobs(i).top(0).token_id(), response.token_ids(i)) << "greedy takes the top token";
      ++tokens;
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 6);
}

TEST_F(WorkerStreamingTest, InfoAndHealthDescribeTheLoadedWorker) {
  auto stub = harness_.Stub();
  grpc::ClientContext context;
  v1::WorkerInfo info;
  ASSERT_TRUE(stub->GetInfo(&context, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.model_id(), "tiny");
  EXPECT_EQ(info.max_context(), kTinyContext);
  EXPECT_EQ(info.block_size(), 16);
  // 64 MiB at 2 x 4 layers x 2 kv heads x 64 x 2 bytes = 2048 bytes per token.
  EXPECT_EQ(info.kv_bytes_per_token(), 2048);
  EXPECT_EQ(info.kv_capacity_tokens(), (64 << 20) / 2048);
  EXPECT_EQ(info.kv_capacity_blocks(), info.kv_capacity_tokens() / 16);
  EXPECT_EQ(harness_.Serving("").value_or(false), true);
  EXPECT_EQ(harness_.Serving("kvfleet.v1.Worker").value_or(false), true);
  EXPECT_EQ(harness_.Serving("liveness").value_or(false), true);
  auto metrics = harness_.ScrapeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->Value("kvfleet_worker_engine_stalled"), 0);
  EXPECT_EQ(metrics->Value("kvfleet_worker_engine_seconds_since_progress"), 0) << "idle reads 0";
  EXPECT_EQ(metrics->Value("kvfleet_worker_preemptions_total"), 0) << "fault counters exist from start-up";
}

// The plaintext health port is for probes: grpc.health.v1 and nothing else.
TEST_F(WorkerStreamingTest, HealthPortServesHealthAndNothingElse) {
  const std::string health = harness_.worker().health_address();
  ASSERT_FALSE(health.empty());
  for (const char* name : {"", "kvfleet.v1.Worker", "liveness"}) {
    EXPECT_EQ(harness_.Serving(name, health).value_or(false), true) << name;
  }
  EXPECT_FALSE(harness_.Serving("no.such.Service", health).ok()) << "unknown names are NOT_FOUND, not SERVING";

  auto channel = NewTestChannel(health);
  grpc::ClientContext info_context;
  v1::WorkerInfo info;
  EXPECT_EQ(v1::Worker::NewStub(channel)->GetInfo(&info_context, v1::GetInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  namespace reflection = grpc::reflection::v1alpha;
  grpc::ClientContext reflection_context;
  auto stream = reflection::ServerReflection::NewStub(channel)->ServerReflectionInfo(&reflection_context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  stream->Write(request);
  stream->WritesDone();
  reflection::ServerReflectionResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED) << "no reflection on the health port";
}

TEST_F(WorkerStreamingTest, ReflectionListsTheWorkerAndHealthServices) {
  namespace reflection = grpc::reflection::v1alpha;
  auto channel = NewTestChannel(harness_.worker().address());
  auto stub = reflection::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  reflection::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) names.push_back(service.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "kvfleet.v1.Worker"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace kvfleet::testing
