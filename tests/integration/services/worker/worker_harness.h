// Shared pieces of the worker's integration tests: a tiny model big enough
// that generations take a while, a real kvfleet-worker process on loopback,
// and a streaming client that records what a caller would see.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvfleet/v1/worker.grpc.pb.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/worker_process.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {

// Context 4096: a request may run thousands of steps, so there is time to
// cancel it, let its deadline pass, or drain it.
inline constexpr int kTinyContext = 4096;

// Writes the harness's tiny model (Q8_0, 4 layers, hidden 256, a ChatML
// template) to `path`; its model id is the file's stem, "tiny" for "tiny.gguf".
absl::Status WriteHarnessModel(const std::string& path);
// Its shape, for a test that writes a variant of it (another architecture).
tools::TinyModelOptions HarnessModelOptions();

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> tokens;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  int messages = 0;
};

class WorkerHarness {
 public:
  // Writes the tiny model (unless `model_path` names another) and starts a
  // worker with `extra_args`; fails the calling test (ASSERT-style) through
  // the returned status.
  absl::Status Start(const std::vector<std::string>& extra_args = {}, const std::string& model_path = "");

  WorkerProcess& worker() { return *worker_; }
  std::unique_ptr<v1::Worker::Stub> Stub() const { return worker_->NewStub(); }

  // Streams one request. `cancel_when` is asked after every message and
  // cancels the call once it returns true.
  StreamResult Generate(const v1::GenerateRequest& request,
                        std::optional<std::chrono::milliseconds> deadline = std::nullopt,
                        const std::function<bool(const StreamResult&)>& cancel_when = nullptr) const;
  StreamResult Generate(v1::Worker::Stub& stub, const v1::GenerateRequest& request,
                        std::optional<std::chrono::milliseconds> deadline = std::nullopt,
                        const std::function<bool(const StreamResult&)>& cancel_when = nullptr) const;

  absl::StatusOr<v1::WorkerStats> Stats() const;
  absl::StatusOr<v1::WorkerInfo> Info() const;
  absl::StatusOr<PrometheusScrape> ScrapeMetrics() const;
  // grpc.health.v1 Check for `service` ("" is the whole server) at
  // `address` (empty: the worker's gRPC port).
  absl::StatusOr<bool> Serving(const std::string& service = "", const std::string& address = "") const;
  // The worker's stderr (its logs).
  std::string LogPath() const { return dir_.Path("worker.log"); }

 private:
  TempDir dir_;
  std::unique_ptr<WorkerProcess> worker_;
};

// A request with a random prompt of `prompt_tokens` tokens of the tiny
// vocabulary (seeded by `seed`), greedy, ignoring end-of-turn tokens.
v1::GenerateRequest TinyRequest(uint64_t seed, int prompt_tokens, int max_tokens);

// Polls `done` every 10 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout);

}  // namespace kvfleet::testing
