#include "tests/integration/services/worker/worker_harness.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/testing/http_get.h"
#include "tests/testing/service_process.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {

tools::TinyModelOptions HarnessModelOptions() {
  return {.dtype = DType::kQ8_0,
          .seed = 3,
          .num_layers = 4,
          .hidden_size = 256,
          .num_heads = 4,
          .num_kv_heads = 2,
          .ffn_size = 512,
          .context_length = kTinyContext};
}

absl::Status WriteHarnessModel(const std::string& path) { return tools::WriteTinyModel(HarnessModelOptions(), path); }

absl::Status WorkerHarness::Start(const std::vector<std::string>& extra_args, const std::string& model_path) {
  std::string model = model_path;
  if (model.empty()) {
    model = dir_.Path("tiny.gguf");
    RETURN_IF_ERROR(WriteHarnessModel(model));
  }
  std::vector<std::string> args = {"--kv-cache-memory", "64MiB", "--threads", "1"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ASSIGN_OR_RETURN(worker_, WorkerProcess::Start({.binary = ServiceBinary("kvfleet-worker", KVFLEET_WORKER_BINARY),
                                                  .model_path = model,
                                                  .extra_args = args,
                                                  .stderr_path = dir_.Path("worker.log")}));
  return absl::OkStatus();
}

StreamResult WorkerHarness::Generate(const v1::GenerateRequest& request,
                                     std::optional<std::chrono::milliseconds> deadline,
                                     const std::function<bool(const StreamResult&)>& cancel_when) const {
  auto stub = Stub();
  return Generate(*stub, request, deadline, cancel_when);
}

StreamResult WorkerHarness::Generate(v1::Worker::Stub& stub, const v1::GenerateRequest& request,
                                     std::optional<std::chrono::milliseconds> deadline,
                                     const std::function<bool(const StreamResult&)>& cancel_when) const {
  grpc::ClientContext context;
  // Never hang a test: without a deadline of its own a call gets two minutes.
  context.set_deadline(std::chrono::system_clock::now() + deadline.value_or(std::chrono::minutes(2)));
  // Many channels connecting at once on a loaded machine: a failed connect
  // attempt is retried by the channel instead of failing the call.
  context.set_wait_for_ready(true);
  StreamResult result;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub.Generate(&context, request);
  v1::GenerateResponse response;
  bool cancelled = false;
  while (reader->Read(&response)) {
    ++result.messages;
    result.tokens.insert(result.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = response.finish_reason();
      result.usage = response.usage();
    }
    if (!cancelled && cancel_when && cancel_when(result)) {
      context.TryCancel();
      cancelled = true;
    }
  }
  result.status = reader->Finish();
  return result;
}

absl::StatusOr<v1::WorkerStats> WorkerHarness::Stats() const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.set_wait_for_ready(true);
  v1::WorkerStats stats;
  const grpc::Status s = Stub()->GetStats(&context, v1::GetStatsRequest(), &stats);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("GetStats: ", s.error_message()));
  return stats;
}

absl::StatusOr<v1::WorkerInfo> WorkerHarness::Info() const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.set_wait_for_ready(true);
  v1::WorkerInfo info;
  const grpc::Status s = Stub()->GetInfo(&context, v1::GetInfoRequest(), &info);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("GetInfo: ", s.error_message()));
  return info;
}

absl::StatusOr<PrometheusScrape> WorkerHarness::ScrapeMetrics() const {
  ASSIGN_OR_RETURN(std::string body, HttpGet("127.0.0.1", worker_->metrics_port(), "/metrics", absl::Seconds(10)));
  return PrometheusScrape::Parse(body);
}

absl::StatusOr<bool> WorkerHarness::Serving(const std::string& service, const std::string& address) const {
  return HealthServing(address.empty() ? worker_->address() : address, service);
}

v1::GenerateRequest TinyRequest(uint64_t seed, int prompt_tokens, int max_tokens) {
  std::mt19937_64 rng(seed);
  v1::GenerateRequest r;
  for (int i = 0; i < prompt_tokens; ++i) {
    r.add_prompt_token_ids(static_cast<int32_t>(3 + rng() % (tools::TinyVocabSize() - 3)));
  }
  r.mutable_stopping()->set_max_tokens(max_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace kvfleet::testing
