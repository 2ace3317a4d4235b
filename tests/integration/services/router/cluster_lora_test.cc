// LoRA adapters through real router, cachemanager and worker processes on
// loopback: a worker killed under streams of an adapter's requests, each
// stream resumed on the other worker under the same adapter with not a
// token changed; and a worker that joins after an admin's load gets the
// adapter before it is sent requests for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "model/lora/peft_adapter_writer.h"
#include "model/model.h"
#include "services/router/frontend/tenant_tokens.h"
#include "tests/integration/services/router/router_cluster.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

class ClusterLoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_path_ = dir_.Path("tiny.gguf");
    ASSERT_TRUE(WriteHarnessModel(model_path_).ok());
    auto model = model::Model::Load(model_path_);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(model::WritePeftAdapter(tools::RandomLoraAdapter(**model, {.name = "sql", .rank = 4, .seed = 5}),
                                        dir_.Path("sql"))
                    .ok());
  }

  TempDir dir_;
  std::string model_path_;
};

TEST_F(ClusterLoraTest, StreamsUnderAnAdapterResumeOnAnotherWorkerWithNoTokenChanged) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster
                  .Start({.workers = 2,
                          .model_path = model_path_,
                          .worker_args = {"--lora", "sql=" + dir_.Path("sql"), "--max-loras", "2"}})
                  .ok());
  constexpr int kStreams = 8;
  std::vector<v1::GenerateTextRequest> requests;
  for (int i = 0; i < kStreams; ++i) {
    requests.push_back(TinyTextRequest(300 + i, 8 + i, 400));
    requests.back().mutable_options()->set_model("sql");
  }
  const std::vector<TextStreamResult> reference = RunConcurrently(cluster, requests, nullptr);
  for (const TextStreamResult& r : reference) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // The workers that ran them report the adapter resident to the
  // cachemanager, whose answers the router places by.
  const auto resident_in_cachemanager = [&] {
    v1::FindOverlapsRequest request;
    request.set_model_id("tiny");
    request.add_block_hashes(std::string(16, '\x01'));
    auto stub = v1::CacheManager::NewStub(NewTestChannel(cluster.cachemanager_address()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::FindOverlapsResponse response;
    std::set<std::string> out;
    if (!stub->FindOverlaps(&context, request, &response).ok()) return out;
    for (const v1::WorkerOverlap& w : response.workers()) {
      for (const std::string& identity : w.load().resident_lora()) {
        if (absl::StartsWith(identity, "sql@") && identity.size() == 4 + 64) out.insert(w.worker_id());
      }
    }
    return out;
  };
  std::set<std::string> ran;
  for (const TextStreamResult& r : reference) ran.insert(r.worker_ids.front());
  ASSERT_TRUE(WaitUntil([&] { return resident_in_cachemanager() == ran; }, milliseconds(10000)))
      << "the cachemanager does not see sql resident where it ran";
  // The base model answers otherwise.
  v1::GenerateTextRequest base = requests.front();
  base.mutable_options()->clear_model();
  ASSERT_NE(cluster.Generate(base).tokens, reference.front().tokens);

  std::mutex mu;
  std::vector<size_t> tokens_seen(kStreams, 0);
  std::vector<std::string> serving(kStreams);
  std::thread disturber([&] {
    ASSERT_TRUE(WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return std::all_of(tokens_seen.begin(), tokens_seen.end(), [](size_t n) { return n > 0; });
        },
        milliseconds(60000)));
    std::lock_guard<std::mutex> lock(mu);
    const auto on_zero = std::count(serving.begin(), serving.end(), "worker-0");
    cluster.KillWorker(on_zero * 2 >= kStreams ? 0 : 1);
  });
  const std::vector<TextStreamResult> disturbed = RunConcurrently(cluster, requests, [&](size_t i, const auto& r) {
    std::lock_guard<std::mutex> lock(mu);
    tokens_seen[i] = r.tokens.size();
    serving[i] = r.worker_ids.back();
  });
  disturber.join();
  int moved = 0;
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(disturbed[i].status.ok()) << disturbed[i].status.error_message();
    EXPECT_EQ(disturbed[i].tokens, reference[i].tokens) << "a token missing, duplicated or changed";
    EXPECT_EQ(disturbed[i].text, reference[i].text);
    moved += disturbed[i].worker_ids.front() != disturbed[i].worker_ids.back();
  }
  EXPECT_GT(moved, 0) << "every stream finished before the kill: raise max_tokens";
}

TEST_F(ClusterLoraTest, AWorkerThatJoinsAfterAnAdminLoadGetsTheAdapterBeforeItsRequests) {
  const std::string admin_token = "ops-token";
  const router::TenantTokens::Digest d = router::TenantTokens::Sha256(admin_token);
  std::ofstream(dir_.Path("admins")) << absl::BytesToHexString(
                                            absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()))
                                     << " ops\n";
  RouterCluster cluster;
  ASSERT_TRUE(cluster
                  .Start({.workers = 1,
                          .model_path = model_path_,
                          .worker_args = {"--max-loras", "2"},
                          .router_args = {"--admin-tokens", dir_.Path("admins")}})
                  .ok());
  auto stub = cluster.Stub();
  v1::LoraAdapterLoad load;
  load.set_lora_name("sql");
  load.set_lora_path(dir_.Path("sql"));
  {
    grpc::ClientContext ctx;
    v1::LoraAdapterChange change;
    const grpc::Status refused = stub->LoadLoraAdapter(&ctx, load, &change);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << "no admin token";
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_token);
    v1::LoraAdapterChange change;
    const grpc::Status loaded = stub->LoadLoraAdapter(&ctx, load, &change);
    ASSERT_TRUE(loaded.ok()) << loaded.error_message();
    EXPECT_EQ(change.workers(), 1);
  }
  v1::GenerateTextRequest request = TinyTextRequest(7, 12, 16);
  request.mutable_options()->set_model("sql");
  const TextStreamResult first = cluster.Generate(request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();

  // A second worker joins; once the router routes to it, it already has sql.
  ASSERT_TRUE(cluster.StartWorker(1).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::WorkerInfo> info = cluster.worker(1).Info();
        return info.ok() && info->lora_adapters_size() == 1;
      },
      milliseconds(30000)))
      << "the router never loaded sql on the new worker";
  // Both workers answer sql alike: the same tokens wherever it runs.
  for (int i = 0; i < 6; ++i) {
    const TextStreamResult again = cluster.Generate(request);
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
    EXPECT_EQ(again.tokens, first.tokens);
  }
}

}  // namespace
}  // namespace kvfleet::testing
