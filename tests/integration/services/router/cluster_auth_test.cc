// Tenant auth on the public API, through real router, cachemanager and
// worker processes: no token or an unknown one is UNAUTHENTICATED with the
// same message; a tenant's repeated prompt hits its prefix cache while
// another tenant's identical prompt does not; no token reaches the logs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "services/router/frontend/tenant_tokens.h"
#include "tests/integration/services/router/router_cluster.h"
#include "tests/testing/child_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {
namespace {

constexpr char kTokenA[] = "tenant-a-secret-3f9c1e";
constexpr char kTokenB[] = "tenant-b-secret-77ad02";

std::string HexDigest(const std::string& token) {
  const router::TenantTokens::Digest d = router::TenantTokens::Sha256(token);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string ReadAll(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class ClusterAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.Path("tokens")) << HexDigest(kTokenA) << " team-a\n" << HexDigest(kTokenB) << " team-b\n";
    ASSERT_TRUE(cluster_
                    .Start({.workers = 1,
                            .router_args = {"--auth-tokens", dir_.Path("tokens"), "--log-level", "debug"},
                            .bearer_token = kTokenA})
                    .ok());
  }

  // A short greedy completion of `prompt` as `token` ("" sends none).
  grpc::Status Complete(const std::string& token, const std::string& prompt, v1::CompleteResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::GenerateTextRequest request;
    request.set_prompt(prompt);
    request.mutable_options()->mutable_stopping()->set_max_tokens(2);
    request.mutable_options()->mutable_stopping()->set_ignore_eos(true);
    return cluster_.Stub()->Complete(&context, request, response);
  }

  TempDir dir_;
  RouterCluster cluster_;
};

TEST_F(ClusterAuthTest, MissingAndUnknownTokensAreRefusedAlike) {
  v1::CompleteResponse response;
  const grpc::Status none = Complete("", "hello", &response);
  const grpc::Status unknown = Complete("not-a-token", "hello", &response);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(none.error_message(), unknown.error_message()) << "no hint which tokens exist";
  EXPECT_TRUE(Complete(kTokenA, "hello", &response).ok());

  grpc::ClientContext context;
  v1::ListModelsResponse models;
  EXPECT_EQ(cluster_.Stub()->ListModels(&context, v1::ListModelsRequest(), &models).error_code(),
            grpc::StatusCode::UNAUTHENTICATED)
      << "every method needs a token";
}

TEST_F(ClusterAuthTest, TenantsNeverShareTheirCachedPrefixes) {
  const std::string prompt = std::string(200, 'x') + " a prompt long enough to fill whole KV blocks";
  v1::CompleteResponse first, again, other;
  ASSERT_TRUE(Complete(kTokenA, prompt, &first).ok());
  ASSERT_TRUE(Complete(kTokenA, prompt, &again).ok());
  ASSERT_TRUE(Complete(kTokenB, prompt, &other).ok());
  EXPECT_EQ(first.usage().cached_prompt_tokens(), 0);
  EXPECT_GT(again.usage().cached_prompt_tokens(), 0) << "a tenant's own prefix is cached";
  EXPECT_EQ(other.usage().cached_prompt_tokens(), 0) << "another tenant's identical prompt is not";
  EXPECT_EQ(other.token_ids(0), first.token_ids(0)) << "the same greedy output all the same";

  const std::string logs = ReadAll(cluster_.RouterLogPath()) + ReadAll(cluster_.WorkerLogPath(0));
  EXPECT_EQ(logs.find(kTokenA), std::string::npos) << "a token in the logs";
  EXPECT_EQ(logs.find(kTokenB), std::string::npos) << "a token in the logs";
}

// The CLI sends the token from a file (never a flag): kvfleet load drives the
// router with it and is refused without it.
TEST_F(ClusterAuthTest, TheLoadToolAuthenticatesWithATokenFile) {
  std::ofstream(dir_.Path("my-token")) << kTokenB << "\n";
  const auto load = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"load",
                                     "--target",
                                     cluster_.router_address(),
                                     "--requests",
                                     "2",
                                     "--prompt-tokens",
                                     "8",
                                     "--max-tokens",
                                     "2",
                                     "--warmup",
                                     "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> cli =
        ChildProcess::Start(KVFLEET_CLI_BINARY, args, dir_.Path("cli.log"));
    if (!cli.ok()) return -1;
    absl::StatusOr<int> code = (*cli)->Wait(absl::Seconds(60));
    return code.ok() ? *code : -1;
  };
  EXPECT_EQ(load({"--token-file", dir_.Path("my-token")}), 0) << ReadAll(dir_.Path("cli.log"));
  EXPECT_NE(load({}), 0) << "no token";
  EXPECT_EQ(ReadAll(dir_.Path("cli.log")).find(kTokenB), std::string::npos) << "the CLI never prints the token";
}

// With TLS off, the internal token: the whole cluster runs with it (the
// router reaches workers and the cachemanager, workers publish), and a
// caller without it is refused by the worker itself.
TEST(ClusterInternalTokenTest, TheClusterServesWithTheTokenAndAWorkerRefusesCallersWithoutIt) {
  TempDir dir;
  const std::string token_file = dir.Path("internal-token");
  std::ofstream(token_file) << "cluster-internal-7c1d9e0b2a44\n";
  const std::vector<std::string> token = {"--internal-token-file", token_file};
  RouterCluster cluster;
  ASSERT_TRUE(
      cluster.Start({.workers = 1, .worker_args = token, .router_args = token, .cachemanager_args = token}).ok());
  const TextStreamResult served = cluster.Generate(TinyTextRequest(3, 8, 4));
  EXPECT_TRUE(served.status.ok()) << served.status.error_message();
  EXPECT_EQ(served.tokens.size(), 4u);
  const StreamResult direct = cluster.worker(0).Generate(TinyRequest(3, 8, 4));
  EXPECT_EQ(direct.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << direct.status.error_message();
  EXPECT_TRUE(cluster.worker(0).Serving().value_or(false)) << "health needs no token";
}

// Per-tenant quotas on a real router: a tenant over its request rate or its
// streams in flight is refused RESOURCE_EXHAUSTED with the quota named and a
// retry hint in the trailers, the other tenant is served meanwhile, a retry
// after the hint succeeds, and the tenant metrics count it all.
TEST(ClusterQuotaTest, ATenantOverItsQuotaIsToldWhenToRetryAndOthersAreServed) {
  TempDir dir;
  std::ofstream(dir.Path("tokens")) << HexDigest(kTokenA) << " team-a\n" << HexDigest(kTokenB) << " team-b\n";
  RouterCluster cluster;
  ASSERT_TRUE(cluster
                  .Start({.workers = 1,
                          .router_args = {"--auth-tokens", dir.Path("tokens"), "--tenant-requests-per-second", "0.5",
                                          "--tenant-request-burst", "2", "--tenant-max-streams", "1",
                                          "--metrics-max-tenants", "1"},
                          .bearer_token = kTokenA})
                  .ok());
  struct Answer {
    grpc::Status status;
    std::multimap<grpc::string_ref, grpc::string_ref> trailers;
    std::string pushback;
  };
  const auto complete = [&](const std::string& token, int max_tokens = 2) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    context.AddMetadata("authorization", "Bearer " + token);
    v1::GenerateTextRequest request = TinyTextRequest(1, 8, max_tokens);
    v1::CompleteResponse response;
    Answer a{.status = cluster.Stub()->Complete(&context, request, &response)};
    const auto it = context.GetServerTrailingMetadata().find("grpc-retry-pushback-ms");
    if (it != context.GetServerTrailingMetadata().end()) a.pushback = std::string(it->second.data(), it->second.size());
    return a;
  };
  EXPECT_TRUE(complete(kTokenA).status.ok());
  EXPECT_TRUE(complete(kTokenA).status.ok());
  const Answer over = complete(kTokenA);
  ASSERT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.status.error_message();
  EXPECT_NE(over.status.error_message().find("--tenant-requests-per-second"), std::string::npos);
  ASSERT_FALSE(over.pushback.empty()) << "a retry hint";
  const int wait_ms = std::stoi(over.pushback);
  EXPECT_GT(wait_ms, 0);
  EXPECT_LE(wait_ms, 2000);
  EXPECT_TRUE(complete(kTokenB).status.ok()) << "another tenant has its own quota";
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  EXPECT_TRUE(complete(kTokenA).status.ok()) << "a retry after the hint";

  // Streams: team-b holds one long generation; a second is refused until it ends.
  std::thread long_stream([&] { EXPECT_TRUE(complete(kTokenB, 3000).status.ok()); });
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::WorkerStats> stats = cluster.worker(0).Stats();
        return stats.ok() && stats->running() == 1;  // the long one is generating
      },
      std::chrono::milliseconds(10000)));
  const Answer second = complete(kTokenB);
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.status.error_message();
  EXPECT_NE(second.status.error_message().find("--tenant-max-streams 1"), std::string::npos)
      << second.status.error_message();
  long_stream.join();

  absl::StatusOr<PrometheusScrape> m = cluster.ScrapeRouter();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->Value("kvfleet_router_tenant_quota_refusals_total", {{"tenant", "team-a"}, {"quota", "requests"}}), 1);
  EXPECT_EQ(m->Value("kvfleet_router_tenant_quota_refusals_total", {{"tenant", "other"}, {"quota", "streams"}}), 1)
      << "--metrics-max-tenants 1: the second tenant is labelled other";
  EXPECT_EQ(m->Value("kvfleet_router_tenant_requests_total", {{"tenant", "team-a"}, {"code", "ok"}}), 3);
  EXPECT_EQ(m->Value("kvfleet_router_tenant_tokens_total", {{"tenant", "team-a"}, {"kind", "generated"}}), 6);
}

}  // namespace
}  // namespace kvfleet::testing
