// SIGTERM drains: readiness turns NOT_SERVING while liveness stays SERVING
// (on the gRPC port and the plaintext health port alike), new requests get
// UNAVAILABLE, in-flight streams finish (or are cut at --drain-timeout), exit 0.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/service_process.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

// Starts `n` long streams and returns once each has its first token.
class InFlight {
 public:
  InFlight(WorkerHarness& harness, int n, int max_tokens) : results_(n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([&, i, max_tokens] {
        results_[i] =
            harness.Generate(TinyRequest(i, 12, max_tokens), std::nullopt, [this](const StreamResult& so_far) {
              // Each stream counts once, at its first message: counting
              // every message let a few fast streams stand for all of them.
              if (so_far.messages == 1) ++started_;
              return false;
            });
      });
    }
  }
  bool WaitAllStarted(int n) {
    return WaitUntil([&] { return started_.load() >= n; }, milliseconds(60000));
  }
  std::vector<StreamResult>& Join() {
    for (auto& t : threads_) t.join();
    return results_;
  }

 private:
  std::vector<StreamResult> results_;
  std::vector<std::thread> threads_;
  std::atomic<int> started_{0};
};

TEST(WorkerLifecycleTest, SigtermLetsSixteenInFlightStreamsFinishThenExitsZero) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--max-num-seqs", "16", "--health-port", "0"}).ok());
  const std::string health_port = harness.worker().health_address();
  ASSERT_FALSE(health_port.empty());
  for (const std::string& address : {std::string(), health_port}) {
    EXPECT_EQ(harness.Serving("", address).value_or(false), true) << address;
    EXPECT_EQ(harness.Serving("liveness", address).value_or(false), true) << address;
  }
  constexpr int kStreams = 16, kTokens = 400;
  InFlight streams(harness, kStreams, kTokens);
  ASSERT_TRUE(streams.WaitAllStarted(kStreams));
  harness.worker().process().Signal(SIGTERM);

  EXPECT_TRUE(WaitUntil([&] { return !harness.Serving("", health_port).value_or(true); }, milliseconds(5000)))
      << "readiness should turn NOT_SERVING while draining";
  EXPECT_FALSE(harness.Serving().value_or(true)) << "on the gRPC port too";
  EXPECT_FALSE(harness.Serving("kvfleet.v1.Worker", health_port).value_or(true));
  EXPECT_TRUE(harness.Serving("liveness", health_port).value_or(false))
      << "liveness stays SERVING while draining, so a drain is never killed as a hang";
  StreamResult late;
  EXPECT_TRUE(WaitUntil(
      [&] {
        late = harness.Generate(TinyRequest(99, 4, 2), milliseconds(5000));
        return late.status.error_code() == grpc::StatusCode::UNAVAILABLE;
      },
      milliseconds(5000)))
      << "a new request during drain should get UNAVAILABLE, got " << late.status.error_code();
  EXPECT_NE(late.status.error_message().find("draining"), std::string::npos) << late.status.error_message();

  for (const StreamResult& r : streams.Join()) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(kTokens));
    EXPECT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH);
  }
  const absl::StatusOr<int> exit_code = harness.worker().process().Wait(absl::Seconds(60));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0);
}

TEST(WorkerLifecycleTest, DrainTimeoutEndsRemainingStreamsUnavailableAndStillExitsZero) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--max-num-seqs", "4", "--drain-timeout", "0.3"}).ok());
  InFlight streams(harness, 4, kTinyContext - 12);
  ASSERT_TRUE(streams.WaitAllStarted(4));
  harness.worker().process().Signal(SIGTERM);
  for (const StreamResult& r : streams.Join()) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("retry"), std::string::npos) << r.status.error_message();
  }
  const absl::StatusOr<int> exit_code = harness.worker().process().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0);
}

TEST(WorkerLifecycleTest, ACorruptModelFileExitsNonZeroNamingTheFile) {
  TempDir dir;
  const std::string path = dir.Path("broken.gguf");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fputs("GGUF but not really", f);
    std::fclose(f);
  }
  auto worker = WorkerProcess::Start({.binary = KVFLEET_WORKER_BINARY,
                                      .model_path = path,
                                      .stderr_path = dir.Path("worker.log"),
                                      .ready_timeout = absl::Seconds(30)});
  ASSERT_FALSE(worker.ok());
  EXPECT_NE(worker.status().message().find("broken.gguf"), std::string::npos) << worker.status();
  // Refused before it binds: it never announced a port (the failure quotes its stdout).
  EXPECT_EQ(worker.status().message().find("listening grpc="), std::string::npos) << worker.status();
}

TEST(WorkerLifecycleTest, AGpuThatCannotBeUsedIsAClearErrorAtStart) {
  // This machine has no usable GPU (a GPU machine runs the gpu-labelled
  // tests instead): asking for one fails at start, saying why and what to do.
  TempDir dir;
  ASSERT_TRUE(WriteHarnessModel(dir.Path("tiny.gguf")).ok());
  const std::string worker_binary = ServiceBinary("kvfleet-worker", KVFLEET_WORKER_BINARY);
  auto gpu = WorkerProcess::Start({.binary = worker_binary,
                                   .model_path = dir.Path("tiny.gguf"),
                                   .extra_args = {"--device", "cuda:3"},
                                   .stderr_path = dir.Path("gpu.log"),
                                   .ready_timeout = absl::Seconds(30)});
  ASSERT_FALSE(gpu.ok()) << "a worker started on cuda:3";
  const std::string message(gpu.status().message());
  EXPECT_NE(message.find("cuda:3"), std::string::npos) << message;
  EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
  EXPECT_EQ(message.find("listening grpc="), std::string::npos)
      << "announced before the device was checked: " << message;

  auto bad = WorkerProcess::Start({.binary = worker_binary,
                                   .model_path = dir.Path("tiny.gguf"),
                                   .extra_args = {"--device", "tpu"},
                                   .stderr_path = dir.Path("bad.log"),
                                   .ready_timeout = absl::Seconds(30)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown device 'tpu'"), std::string::npos) << bad.status();
}

TEST(WorkerLifecycleTest, AutoTakesTheCpuHereAndReportsItsNumerics) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--device", "auto"}).ok());
  grpc::ClientContext ctx;
  v1::WorkerInfo info;
  ASSERT_TRUE(harness.Stub()->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.device(), "cpu");
  EXPECT_EQ(info.numerics(), "cpu/1");
  auto scrape = harness.ScrapeMetrics();
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(
      scrape->Value("kvfleet_worker_device_info", {{"device", "cpu"}, {"numerics", "cpu/1"}, {"mode_source", "exact"}}),
      1.0);
  EXPECT_GT(scrape->Value("kvfleet_worker_memory_bytes", {{"part", "kv_cache"}}), 0.0);
  EXPECT_GT(scrape->Value("kvfleet_worker_memory_bytes", {{"part", "scratch"}}), 0.0);
}

// A tensor-parallel worker whose rank fails mid-step (the chaos flag stands
// in for a device or communicator error): the step's stream ends in an
// error, and the worker says which rank failed and exits non-zero rather
// than serve another step from ranks whose caches no longer agree.
TEST(WorkerLifecycleTest, ATensorParallelRankThatFailsEndsTheWorkerNamingTheRank) {
  WorkerHarness harness;
  ASSERT_TRUE(harness.Start({"--tensor-parallel", "2", "--fault-tensor-parallel-rank", "1:6"}).ok());
  grpc::ClientContext ctx;
  v1::WorkerInfo info;
  ASSERT_TRUE(harness.Stub()->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.numerics(), "cpu/1+tp2");
  // Steps 1-5 run (a prefill, then decodes); the sixth fails on rank 1.
  const StreamResult result = harness.Generate(TinyRequest(7, 8, 64));
  EXPECT_FALSE(result.status.ok()) << "a stream outlived its replica's failed rank";
  EXPECT_LT(result.tokens.size(), 64u);
  const absl::StatusOr<int> exit_code = harness.worker().process().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_NE(*exit_code, 0);
  std::stringstream log;
  log << std::ifstream(harness.LogPath()).rdbuf();
  EXPECT_NE(log.str().find("tensor-parallel rank 1 of 2 failed mid-step"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("exiting"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace kvfleet::testing
