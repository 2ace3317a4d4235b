#include "tools/load/load_runner.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tools/load/report_format.h"

namespace kvfleet::load {
namespace {

// A fake worker: streams max_tokens tokens, two per message, a few
// milliseconds apart. Prompt token 0 is rejected with INVALID_ARGUMENT;
// prompt token 1 hangs until the client gives up.
class FakeWorker final : public kvfleet::v1::Worker::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* context, const kvfleet::v1::GenerateRequest* request,
                        grpc::ServerWriter<kvfleet::v1::GenerateResponse>* writer) override {
    Record(*request);
    const int now = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    grpc::Status status = Stream(context, *request, writer);
    --in_flight_;
    return status;
  }

  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<std::string> ids() const {
    absl::MutexLock lock(&mu_);
    return ids_;
  }
  std::set<std::string> salts() const {
    absl::MutexLock lock(&mu_);
    return salts_;
  }

 private:
  void Record(const kvfleet::v1::GenerateRequest& request) {
    absl::MutexLock lock(&mu_);
    ids_.push_back(request.request_id());
    salts_.insert(request.cache_salt());
  }

  static grpc::Status Stream(grpc::ServerContext* context, const kvfleet::v1::GenerateRequest& request,
                             grpc::ServerWriter<kvfleet::v1::GenerateResponse>* writer) {
    if (request.prompt_token_ids(0) == 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "token 0");
    if (request.prompt_token_ids(0) == 1) {
      while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
    }
    const int32_t max_tokens = request.stopping().max_tokens();
    for (int32_t sent = 0; sent < max_tokens;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      kvfleet::v1::GenerateResponse response;
      for (int k = 0; k < 2 && sent < max_tokens; ++k) response.add_token_ids(100 + sent++);
      if (sent == max_tokens) {
        response.set_finish_reason(kvfleet::v1::FINISH_REASON_LENGTH);
        response.mutable_usage()->set_prompt_tokens(request.prompt_token_ids_size());
        response.mutable_usage()->set_cached_prompt_tokens(1);
        response.mutable_usage()->set_generated_tokens(max_tokens);
      }
      if (!writer->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
    }
    return grpc::Status::OK;
  }

  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> salts_ ABSL_GUARDED_BY(mu_);
};

class LoadRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&worker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = kvfleet::v1::Worker::NewStub(
        transport::CreateClientChannel("127.0.0.1:" + std::to_string(port)));
  }
  void TearDown() override { server_->Shutdown(); }

  static std::vector<LoadRequest> Requests(int n, int32_t first_token, int32_t max_tokens) {
    return std::vector<LoadRequest>(n, LoadRequest{.prompt_token_ids = {first_token, 7, 8}, .max_tokens = max_tokens});
  }

  FakeWorker worker_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<kvfleet::v1::Worker::Stub> stub_;
};

TEST_F(LoadRunnerTest, SendsEveryRequestOnceAndCountsTokens) {
  const LoadOptions options{.concurrency = 4, .cache_salt = "salt-a", .request_id_prefix = "t-"};
  absl::StatusOr<LoadReport> report = RunLoad(*stub_, Requests(16, 5, 6), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->concurrency, 4);
  EXPECT_EQ(report->requests, 16);
  EXPECT_EQ(report->completed, 16);
  EXPECT_EQ(report->failed(), 0);
  EXPECT_TRUE(report->errors.empty());
  EXPECT_EQ(report->prompt_tokens, 16 * 3);
  EXPECT_EQ(report->cached_prompt_tokens, 16);
  EXPECT_EQ(report->generated_tokens, 16 * 6);
  EXPECT_GT(report->wall_seconds, 0);
  EXPECT_NEAR(report->output_tokens_per_second, 96 / report->wall_seconds, 1e-6);
  EXPECT_NEAR(report->requests_per_second, 16 / report->wall_seconds, 1e-6);
  // Messages of 2 tokens: the first message is TTFT; the other two add 2 ITL samples each.
  EXPECT_EQ(report->ttft.count(), 16u);
  EXPECT_EQ(report->itl.count(), 16u * 4);
  EXPECT_EQ(report->e2e.count(), 16u);
  EXPECT_GE(report->e2e.Min(), report->ttft.Min());

  std::vector<std::string> ids = worker_.ids();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a request was sent twice";
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids[0].rfind("t-", 0), 0u);
  EXPECT_EQ(worker_.salts(), std::set<std::string>{"salt-a"});
  EXPECT_LE(worker_.max_in_flight(), 4);
}

TEST_F(LoadRunnerTest, ConcurrencyOneRunsOneAtATime) {
  absl::StatusOr<LoadReport> report = RunLoad(*stub_, Requests(5, 5, 4), {.concurrency = 1});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->completed, 5);
  EXPECT_EQ(worker_.max_in_flight(), 1);
}

TEST_F(LoadRunnerTest, CountsErrorsByCode) {
  std::vector<LoadRequest> requests = Requests(3, 5, 2);
  for (LoadRequest& r : Requests(2, 0, 2)) requests.push_back(r);
  for (LoadRequest& r : Requests(1, 1, 2)) requests.push_back(r);
  absl::StatusOr<LoadReport> report =
      RunLoad(*stub_, requests, {.concurrency = 3, .deadline = absl::Milliseconds(300)});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->requests, 6);
  EXPECT_EQ(report->completed, 3);
  EXPECT_EQ(report->failed(), 3);
  EXPECT_EQ(report->errors, (std::map<std::string, int64_t>{{"INVALID_ARGUMENT", 2}, {"DEADLINE_EXCEEDED", 1}}));
  EXPECT_EQ(report->error_examples.at("INVALID_ARGUMENT"), "token 0");
  EXPECT_EQ(report->e2e.count(), 3u) << "failed requests add no latency";
  EXPECT_EQ(report->generated_tokens, 6);
}

TEST_F(LoadRunnerTest, RejectsBadOptions) {
  EXPECT_FALSE(RunLoad(*stub_, Requests(1, 5, 2), {.concurrency = 0}).ok());
  EXPECT_FALSE(RunLoad(*stub_, {}, {.concurrency = 1}).ok());
  EXPECT_FALSE(RunLoad(*stub_, Requests(1, 5, 2), {.deadline = absl::ZeroDuration()}).ok());
}

TEST(LoadRequestProtoTest, CarriesEveryField) {
  const LoadRequest request{
      .prompt_token_ids = {3, 4}, .max_tokens = 9, .temperature = 0.5f, .seed = 11, .ignore_eos = true};
  const kvfleet::v1::GenerateRequest proto =
      ToGenerateRequest(request, 7, {.cache_salt = "s", .request_id_prefix = "p-"});
  EXPECT_EQ(proto.request_id(), "p-7");
  EXPECT_EQ(std::vector<int32_t>(proto.prompt_token_ids().begin(), proto.prompt_token_ids().end()),
            request.prompt_token_ids);
  EXPECT_EQ(proto.sampling().temperature(), 0.5f);
  EXPECT_TRUE(proto.sampling().has_seed());
  EXPECT_EQ(proto.sampling().seed(), 11u);
  EXPECT_EQ(proto.stopping().max_tokens(), 9);
  EXPECT_TRUE(proto.stopping().ignore_eos());
  EXPECT_EQ(proto.cache_salt(), "s");
  EXPECT_FALSE(ToGenerateRequest({.prompt_token_ids = {1}, .max_tokens = 1}, 0, {}).sampling().has_seed());
}

// A router gets the same request: token ids, sampling, stopping, salt and id.
TEST(LoadRequestProtoTest, TheRoutersRequestCarriesTheSameFields) {
  const LoadRequest request{
      .prompt_token_ids = {3, 4}, .max_tokens = 9, .temperature = 0.5f, .seed = 11, .ignore_eos = true};
  const LoadOptions options{.cache_salt = "s", .request_id_prefix = "p-"};
  const kvfleet::v1::GenerateRequest worker = ToGenerateRequest(request, 7, options);
  const kvfleet::v1::GenerateTextRequest router = ToGenerateTextRequest(request, 7, options);
  EXPECT_TRUE(router.prompt().empty());
  EXPECT_EQ(std::vector<int32_t>(router.prompt_token_ids().begin(), router.prompt_token_ids().end()),
            request.prompt_token_ids);
  EXPECT_EQ(router.options().request_id(), "p-7");
  EXPECT_EQ(router.options().sampling().SerializeAsString(), worker.sampling().SerializeAsString());
  EXPECT_EQ(router.options().stopping().SerializeAsString(), worker.stopping().SerializeAsString());
  EXPECT_EQ(router.options().cache_salt(), "s");
}

}  // namespace
}  // namespace kvfleet::load
