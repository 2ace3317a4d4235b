#include "tools/load/load_runner.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::load {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string CodeName(grpc::StatusCode code) {
  // gRPC's codes and absl's share their numbers and names.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// Runs one request to the end of its stream and adds what it measured to
// `tally` (one per thread, so no locking).
void RunOne(GenerationTarget& target, const LoadRequest& request, size_t index, const LoadOptions& options,
            LoadReport& tally) {
  LatencyStats itl;
  double ttft = -1;
  int64_t tokens = 0;
  kvfleet::v1::Usage usage;
  bool has_usage = false;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  const grpc::Status status =
      target.Stream(request, index, options, [&](int k, const kvfleet::v1::Usage* message_usage) {
        const Clock::time_point now = Clock::now();
        if (message_usage != nullptr) {
          usage = *message_usage;
          has_usage = true;
        }
        if (k == 0) return;
        if (ttft < 0) {
          ttft = Seconds(now - start);
        } else {
          const double gap = Seconds(now - last) / k;
          for (int i = 0; i < k; ++i) itl.Add(gap);
        }
        last = now;
        tokens += k;
      });
  const double e2e = Seconds(Clock::now() - start);
  ++tally.requests;
  if (!status.ok()) {
    const std::string name = CodeName(status.error_code());
    if (tally.errors[name]++ == 0) tally.error_examples[name] = status.error_message();
    return;
  }
  ++tally.completed;
  tally.prompt_tokens += has_usage ? usage.prompt_tokens() : static_cast<int64_t>(request.prompt_token_ids.size());
  tally.cached_prompt_tokens += has_usage ? usage.cached_prompt_tokens() : 0;
  tally.generated_tokens += tokens;
  if (ttft >= 0) tally.ttft.Add(ttft);
  tally.itl.Merge(itl);
  tally.e2e.Add(e2e);
}

void MergeInto(LoadReport& into, const LoadReport& from) {
  into.requests += from.requests;
  into.completed += from.completed;
  for (const auto& [name, n] : from.errors) into.errors[name] += n;
  for (const auto& [name, message] : from.error_examples) into.error_examples.emplace(name, message);
  into.prompt_tokens += from.prompt_tokens;
  into.cached_prompt_tokens += from.cached_prompt_tokens;
  into.generated_tokens += from.generated_tokens;
  into.ttft.Merge(from.ttft);
  into.itl.Merge(from.itl);
  into.e2e.Merge(from.e2e);
}

// One Generate stream (a worker's or a router's: their responses share
// token_ids and usage) read to its end, reporting each message.
template <typename Response>
grpc::Status ReadToEnd(grpc::ClientReaderInterface<Response>& reader, const GenerationTarget::OnMessage& on_message) {
  Response response;
  while (reader.Read(&response)) on_message(response.token_ids_size(), response.has_usage() ? &response.usage() : nullptr);
  return reader.Finish();
}

template <typename Stub, typename Request>
grpc::Status StreamGenerate(Stub& stub, const Request& proto, const LoadOptions& options,
                            const GenerationTarget::OnMessage& on_message) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(options.deadline));
  if (!options.bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + options.bearer_token);
  return ReadToEnd(*stub.Generate(&context, proto), on_message);
}

}  // namespace

grpc::Status WorkerTarget::Stream(const LoadRequest& request, size_t index, const LoadOptions& options,
                                  const OnMessage& on_message) {
  return StreamGenerate(stub_, ToGenerateRequest(request, index, options), options, on_message);
}

grpc::Status RouterTarget::Stream(const LoadRequest& request, size_t index, const LoadOptions& options,
                                  const OnMessage& on_message) {
  return StreamGenerate(stub_, ToGenerateTextRequest(request, index, options), options, on_message);
}

absl::Status LoadOptions::Validate() const {
  if (concurrency < 1) return absl::InvalidArgumentError(absl::StrCat("concurrency must be >= 1, got ", concurrency));
  if (deadline <= absl::ZeroDuration()) return absl::InvalidArgumentError("the per-request deadline must be positive");
  return absl::OkStatus();
}

kvfleet::v1::GenerateRequest ToGenerateRequest(const LoadRequest& request, size_t index, const LoadOptions& options) {
  kvfleet::v1::GenerateRequest proto;
  proto.set_request_id(absl::StrCat(options.request_id_prefix, index));
  proto.mutable_prompt_token_ids()->Add(request.prompt_token_ids.begin(), request.prompt_token_ids.end());
  proto.mutable_sampling()->set_temperature(request.temperature);
  if (request.seed.has_value()) proto.mutable_sampling()->set_seed(*request.seed);
  proto.mutable_stopping()->set_max_tokens(request.max_tokens);
  proto.mutable_stopping()->set_ignore_eos(request.ignore_eos);
  proto.set_cache_salt(options.cache_salt);
  return proto;
}

kvfleet::v1::GenerateTextRequest ToGenerateTextRequest(const LoadRequest& request, size_t index,
                                                       const LoadOptions& options) {
  const kvfleet::v1::GenerateRequest worker = ToGenerateRequest(request, index, options);
  kvfleet::v1::GenerateTextRequest proto;
  *proto.mutable_prompt_token_ids() = worker.prompt_token_ids();
  kvfleet::v1::GenerationOptions& o = *proto.mutable_options();
  o.set_request_id(worker.request_id());
  *o.mutable_sampling() = worker.sampling();
  *o.mutable_stopping() = worker.stopping();
  o.set_cache_salt(worker.cache_salt());
  return proto;
}

absl::StatusOr<LoadReport> RunLoad(kvfleet::v1::Worker::StubInterface& stub, const std::vector<LoadRequest>& requests,
                                   const LoadOptions& options) {
  WorkerTarget target(stub);
  return RunLoad(target, requests, options);
}

absl::StatusOr<LoadReport> RunLoad(GenerationTarget& target, const std::vector<LoadRequest>& requests,
                                   const LoadOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (requests.empty()) return absl::InvalidArgumentError("a load run needs at least one request");
  const size_t num_threads = std::min(static_cast<size_t>(options.concurrency), requests.size());
  std::vector<LoadReport> tallies(num_threads);
  std::atomic<size_t> next{0};

  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(num_threads);
  for (size_t t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
        RunOne(target, requests[i], i, options, tallies[t]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double wall = Seconds(Clock::now() - start);

  LoadReport report;
  report.concurrency = options.concurrency;
  for (const LoadReport& tally : tallies) MergeInto(report, tally);
  report.wall_seconds = wall;
  report.requests_per_second = wall > 0 ? static_cast<double>(report.completed) / wall : 0;
  report.output_tokens_per_second = wall > 0 ? static_cast<double>(report.generated_tokens) / wall : 0;
  return report;
}

}  // namespace kvfleet::load
