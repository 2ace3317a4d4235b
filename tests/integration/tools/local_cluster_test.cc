// `kvfleet up` end to end: a real cachemanager, two real workers and a real
// router started by the CLI, called through the router, stopped by SIGINT
// with nothing left running.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/child_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kReadyPrefix[] = "kvfleet up ready router=";

// The processes whose parent is `parent` (from /proc/*/stat).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
    pid_t ppid;
    if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &ppid) && ppid == parent) children.push_back(pid);
  }
  return children;
}

// True once `pid` is gone or a zombie (a container's init may not reap).
bool Dead(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close == std::string::npos || line.substr(close + 2, 1) == "Z";
}

// Waits up to 10 s for the router to count `n` live workers (discovery
// through the cachemanager is asynchronous); returns the last count seen.
int AwaitLiveWorkers(v1::Inference::Stub& stub, int n) {
  int live = -1;
  WaitUntil(
      [&] {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        v1::ListModelsResponse models;
        if (!stub.ListModels(&context, v1::ListModelsRequest(), &models).ok() || models.models_size() == 0) {
          return false;
        }
        live = models.models(0).live_workers();
        return live == n;
      },
      std::chrono::seconds(10));
  return live;
}

std::string ReadFile(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class KvfleetUpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.Path("tiny.gguf");
    ASSERT_TRUE(WriteHarnessModel(model_).ok());
  }

  // SIGKILLs the cluster's services if the test left them running: they
  // run in process groups of their own, out of reach of ChildProcess's kill.
  void TearDown() override {
    for (pid_t pid : services_) {
      if (!Dead(pid)) ::kill(pid, SIGKILL);
    }
  }

  // `kvfleet up` on free ports with `extra` flags; its stderr goes to up.log.
  std::unique_ptr<ChildProcess> StartUp(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"up",
                                     "--model",
                                     model_,
                                     "--workers",
                                     "2",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--http-listen",
                                     "127.0.0.1:0",
                                     "--cachemanager-listen",
                                     "127.0.0.1:0",
                                     "--metrics-port",
                                     "0",
                                     "--kv-cache-memory",
                                     "64MiB",
                                     "--threads",
                                     "1",
                                     "--log-dir",
                                     dir_.Path("logs")};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> up = ChildProcess::Start(KVFLEET_CLI_BINARY, args, UpLog());
    EXPECT_TRUE(up.ok()) << up.status();
    return up.ok() ? *std::move(up) : nullptr;
  }

  std::string UpLog() const { return dir_.Path("up.log"); }

  // Waits for kvfleet up's ready line ("router=H:P http=H:Q") and records
  // its service processes: the router's gRPC address (the HTTP one in
  // http_), or "" (the failure recorded) if it never came.
  std::string AwaitReady(ChildProcess& up) {
    absl::StatusOr<std::string> ready = up.WaitForLine(kReadyPrefix, absl::Minutes(3));
    if (!ready.ok()) {
      ADD_FAILURE() << ready.status() << Diagnostics();
      return "";
    }
    services_ = ChildrenOf(up.pid());
    const std::vector<std::string> words = absl::StrSplit(ready->substr(std::string(kReadyPrefix).size()), ' ');
    http_.clear();
    for (const std::string& w : words) {
      if (absl::StartsWith(w, "http=")) http_ = w.substr(5);
    }
    EXPECT_FALSE(http_.empty()) << "no http= in the ready line: " << *ready;
    return words.front();
  }

  // Runs the kvfleet CLI with `args` (its stderr to cli.log): its exit code,
  // -1 when it could not run; its stdout lines in `lines` when given.
  int RunCli(const std::vector<std::string>& args, std::vector<std::string>* lines = nullptr) const {
    absl::StatusOr<std::unique_ptr<ChildProcess>> cli = ChildProcess::Start(KVFLEET_CLI_BINARY, args, dir_.Path("cli.log"));
    if (!cli.ok()) return -1;
    absl::StatusOr<int> code = (*cli)->Wait(absl::Seconds(60));
    if (lines != nullptr) *lines = (*cli)->StdoutLines();
    return code.ok() ? *code : -1;
  }

  // The cachemanager's address, from kvfleet up's "cachemanager ready at" line.
  std::string CachemanagerFromLog() const {
    const std::string log = ReadFile(UpLog());
    const size_t at = log.find("cachemanager ready at ");
    EXPECT_NE(at, std::string::npos) << log;
    return at == std::string::npos ? "" : log.substr(at + 22, log.find(' ', at + 22) - at - 22);
  }

  std::string Diagnostics() const {
    return "\n--- kvfleet up stderr:\n" + ReadFile(UpLog()) + "\n--- router log:\n" +
           ReadFile(dir_.Path("logs/router.log"));
  }

  TempDir dir_;
  std::string model_;
  std::vector<pid_t> services_;
  std::string http_;  // the router's OpenAI-compatible port, from the ready line
};

TEST_F(KvfleetUpTest, ServesThroughTheRouterAndStopsCleanlyOnSigint) {
  std::unique_ptr<ChildProcess> up = StartUp({});
  ASSERT_NE(up, nullptr);
  const std::string router = AwaitReady(*up);
  ASSERT_FALSE(router.empty());
  EXPECT_EQ(services_.size(), 4u) << "cachemanager, two workers, router";
  for (const char* log : {"cachemanager.log", "worker-0.log", "worker-1.log", "router.log"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_.Path(std::string("logs/") + log))) << log;
  }

  auto stub = v1::Inference::NewStub(NewTestChannel(router));
  EXPECT_EQ(AwaitLiveWorkers(*stub, 2), 2) << Diagnostics();
  // The OpenAI-compatible port is on too (its own tests:
  // tests/integration/clients/openai_client_test.py).
  const size_t colon = http_.rfind(':');
  int http_port = 0;
  ASSERT_TRUE(colon != std::string::npos && absl::SimpleAtoi(http_.substr(colon + 1), &http_port)) << http_;
  absl::StatusOr<std::string> health = testing::HttpGet("127.0.0.1", http_port, "/health", absl::Seconds(10));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_THAT(*health, HasSubstr("\"live_workers\":2"));

  v1::GenerateTextRequest request;
  request.set_prompt("hello world, hello cluster");
  request.mutable_options()->mutable_stopping()->set_max_tokens(8);
  request.mutable_options()->mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&context, request);
  v1::GenerateTextResponse response;
  int tokens = 0;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  std::string worker;
  while (reader->Read(&response)) {
    tokens += response.token_ids_size();
    if (!response.worker_id().empty()) worker = response.worker_id();
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = response.finish_reason();
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message() << Diagnostics();
  EXPECT_EQ(tokens, 8);
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);
  EXPECT_TRUE(worker == "worker-0" || worker == "worker-1") << worker;

  // The CLI's own client against the same router.
  absl::StatusOr<std::unique_ptr<ChildProcess>> cli = ChildProcess::Start(
      KVFLEET_CLI_BINARY,
      {"generate", "--router", router, "--prompt", "hello", "--max-tokens", "4", "--ignore-eos", "--output", "ids"},
      dir_.Path("generate.log"));
  ASSERT_TRUE(cli.ok()) << cli.status();
  ASSERT_EQ(*(*cli)->Wait(absl::Seconds(60)), 0) << ReadFile(dir_.Path("generate.log"));
  const std::vector<std::string> out = (*cli)->StdoutLines();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(out.back(), ',')).size(), 4u) << out.back();
  EXPECT_THAT(ReadFile(dir_.Path("generate.log")), HasSubstr("4 generated, finish: length, worker worker-"));

  up->Signal(SIGINT);
  absl::StatusOr<int> code = up->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status() << Diagnostics();
  EXPECT_EQ(*code, 0) << Diagnostics();
  for (pid_t pid : services_) EXPECT_TRUE(Dead(pid)) << "service pid " << pid << " outlived kvfleet up";
}

TEST_F(KvfleetUpTest, AskAnswersThenExits) {
  std::unique_ptr<ChildProcess> up = StartUp({"--ask", "What is the capital of France?", "--exit-after-ask"});
  ASSERT_NE(up, nullptr);
  absl::StatusOr<std::string> ready = up->WaitForLine(kReadyPrefix, absl::Minutes(3));
  ASSERT_TRUE(ready.ok()) << ready.status() << Diagnostics();
  services_ = ChildrenOf(up->pid());
  absl::StatusOr<int> code = up->Wait(absl::Seconds(90));
  ASSERT_TRUE(code.ok()) << code.status() << Diagnostics();
  EXPECT_EQ(*code, 0) << Diagnostics();
  EXPECT_THAT(ReadFile(UpLog()), HasSubstr("generated, finish: ")) << "the answer's summary";
  for (pid_t pid : services_) EXPECT_TRUE(Dead(pid)) << "service pid " << pid << " outlived kvfleet up";
}

// --tls: every hop over (mutual) TLS from a throwaway CA. The router sees
// both workers (worker -> cachemanager and router -> cachemanager are mTLS)
// and generates (router -> worker is mTLS); a plaintext client is refused.
TEST_F(KvfleetUpTest, TheWholeClusterServesOverTls) {
  std::unique_ptr<ChildProcess> up = StartUp({"--tls"});
  ASSERT_NE(up, nullptr);
  const std::string router = AwaitReady(*up);
  ASSERT_FALSE(router.empty());
  const std::string ca = dir_.Path("logs/tls/ca.pem");
  ASSERT_TRUE(std::filesystem::exists(ca)) << Diagnostics();

  auto stub = v1::Inference::NewStub(transport::CreateClientChannel(router, {.own_connection = true, .tls = {.ca = ca}}));
  EXPECT_EQ(AwaitLiveWorkers(*stub, 2), 2) << Diagnostics();

  v1::CompleteResponse completion;
  {
    v1::GenerateTextRequest request;
    request.set_prompt("hello world, hello cluster");
    request.mutable_options()->mutable_stopping()->set_max_tokens(4);
    request.mutable_options()->mutable_stopping()->set_ignore_eos(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    const grpc::Status status = stub->Complete(&context, request, &completion);
    ASSERT_TRUE(status.ok()) << status.error_message() << Diagnostics();
  }
  EXPECT_EQ(completion.token_ids_size(), 4);

  grpc::ClientContext plain_context;
  plain_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListModelsResponse models;
  EXPECT_EQ(v1::Inference::NewStub(NewTestChannel(router))->ListModels(&plain_context, v1::ListModelsRequest(), &models)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a plaintext client of a TLS router";

  // The CLI over TLS: load through the router; the cachemanager's worker list
  // with a router's client certificate, and refused without one.
  EXPECT_EQ(RunCli({"load", "--target", router, "--tls-ca", ca, "--requests", "2", "--prompt-tokens", "8",
                    "--max-tokens", "4"}),
            0)
      << ReadFile(dir_.Path("cli.log"));
  const std::string cachemanager = CachemanagerFromLog();
  std::vector<std::string> lines;
  EXPECT_EQ(RunCli({"workers", "--cachemanager", cachemanager, "--tls-ca", ca, "--tls-cert",
                    dir_.Path("logs/tls/router.pem"), "--tls-key", dir_.Path("logs/tls/router.key")},
                   &lines),
            0)
      << ReadFile(dir_.Path("cli.log"));
  EXPECT_THAT(lines, ::testing::Contains("2 live workers"));
  EXPECT_NE(RunCli({"workers", "--cachemanager", cachemanager, "--tls-ca", ca}), 0)
      << "the cachemanager requires a client certificate";
  up->Signal(SIGINT);
  absl::StatusOr<int> code = up->Wait(absl::Seconds(90));
  ASSERT_TRUE(code.ok()) << code.status() << Diagnostics();
  EXPECT_EQ(*code, 0) << Diagnostics();
}

// Without TLS, --internal-token: the cluster serves as usual, its workers
// and cachemanager refuse callers without the token, and the CLI passes it.
TEST_F(KvfleetUpTest, TheInternalTokenGuardsWorkersAndTheCachemanager) {
  std::unique_ptr<ChildProcess> up = StartUp({"--internal-token", "--workers", "1"});
  ASSERT_NE(up, nullptr);
  const std::string router = AwaitReady(*up);
  ASSERT_FALSE(router.empty());
  const std::string token = dir_.Path("logs/internal-token");
  ASSERT_TRUE(std::filesystem::exists(token)) << Diagnostics();
  EXPECT_EQ(std::filesystem::status(token).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(RunCli({"load", "--target", router, "--requests", "2", "--prompt-tokens", "8", "--max-tokens", "4"}), 0)
      << "the router's public port needs no internal token: " << ReadFile(dir_.Path("cli.log"));
  const std::string cachemanager = CachemanagerFromLog();
  EXPECT_EQ(RunCli({"workers", "--cachemanager", cachemanager, "--internal-token-file", token}), 0)
      << ReadFile(dir_.Path("cli.log"));
  EXPECT_NE(RunCli({"workers", "--cachemanager", cachemanager}), 0) << "the cachemanager requires the token";
  EXPECT_THAT(ReadFile(dir_.Path("cli.log")), HasSubstr("internal token"));
  up->Signal(SIGINT);
  absl::StatusOr<int> code = up->Wait(absl::Seconds(90));
  ASSERT_TRUE(code.ok()) << code.status() << Diagnostics();
  EXPECT_EQ(*code, 0) << Diagnostics();
}

TEST_F(KvfleetUpTest, AMissingModelFailsBeforeStartingAnything) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> up =
      ChildProcess::Start(KVFLEET_CLI_BINARY, {"up", "--model", dir_.Path("missing.gguf")}, UpLog());
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(*(*up)->Wait(absl::Seconds(30)), 1);
  const std::string log = ReadFile(UpLog());
  EXPECT_THAT(log, HasSubstr("no model at " + dir_.Path("missing.gguf")));
  EXPECT_THAT(log, HasSubstr("--model PATH")) << "the error says what to do";
}

}  // namespace
}  // namespace kvfleet::testing
