// Drives a worker (kvfleet.v1.Worker) or a router (kvfleet.v1.Inference,
// with token-id prompts) with N concurrent streaming Generate calls and
// measures throughput and latency: the core of `kvfleet load`, free of flags
// and printing so tests can run it against an in-process fake worker.
//
// RunLoad starts `concurrency` threads; each takes the next request index
// from a shared atomic counter and runs one synchronous server-streaming
// Generate to its end, so at most `concurrency` requests are in flight and
// every request is sent exactly once. Latencies, measured on the steady
// clock from just before the call to each message's arrival:
//   TTFT  the first message carrying at least one token;
//   ITL   each later message that carries k tokens, arriving g seconds after
//         the previous token-carrying message, adds k samples of g / k (the
//         gap is spread evenly over its tokens, so speculative or batched
//         deliveries neither vanish nor look like one slow token); tokens in
//         the first message are covered by TTFT and add none;
//   E2E   from the call to the end of the stream.
// Only requests that end with status OK contribute latencies and token
// counts; the others are counted by status code name.
// Thread-safety: RunLoad is safe to call from any thread; the stub must be
// thread-safe (generated gRPC stubs are).
//
//   ASSIGN_OR_RETURN(LoadReport report, RunLoad(*stub, requests, {.concurrency = 8}));
//   std::cout << FormatTableRow(report);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "kvfleet/v1/worker.grpc.pb.h"
#include "tools/load/latency_stats.h"
#include "tools/load/workload.h"

namespace kvfleet::load {

struct LoadOptions {
  int32_t concurrency = 1;
  absl::Duration deadline = absl::Seconds(300);  // per request, from its start
  // Sent with every request. Distinct salts never share prefix-cache
  // blocks, so a run with a fresh salt starts from a cold cache.
  std::string cache_salt;
  std::string request_id_prefix = "load-";  // request i is named prefix + i
  std::string bearer_token;                 // sent as `authorization: Bearer` when set (a router with auth)

  absl::Status Validate() const;
};

struct LoadReport {
  int32_t concurrency = 0;
  int64_t requests = 0;                               // sent
  int64_t completed = 0;                              // ended with status OK
  std::map<std::string, int64_t> errors;              // gRPC status code name -> count
  std::map<std::string, std::string> error_examples;  // code name -> its first message
  double wall_seconds = 0;                            // first call to last stream end
  // Of completed requests; prompt tokens as the worker's usage reports them.
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double requests_per_second = 0;       // completed / wall_seconds
  double output_tokens_per_second = 0;  // generated_tokens / wall_seconds
  LatencyStats ttft, itl, e2e;          // seconds

  int64_t failed() const { return requests - completed; }
};

// One streamed generation, whichever service answers it: sends request
// number `index`, calls `on_message` with each message's token count and
// usage (null when it carries none), returns the stream's final status.
// Must be thread-safe.
class GenerationTarget {
 public:
  using OnMessage = std::function<void(int tokens, const kvfleet::v1::Usage* usage)>;
  virtual ~GenerationTarget() = default;
  virtual grpc::Status Stream(const LoadRequest& request, size_t index, const LoadOptions& options,
                              const OnMessage& on_message) = 0;
};

// A worker's Generate.
class WorkerTarget : public GenerationTarget {
 public:
  explicit WorkerTarget(kvfleet::v1::Worker::StubInterface& stub) : stub_(stub) {}
  grpc::Status Stream(const LoadRequest& request, size_t index, const LoadOptions& options,
                      const OnMessage& on_message) override;

 private:
  kvfleet::v1::Worker::StubInterface& stub_;
};

// A router's Generate with the prompt as token ids, so the same workload
// measures the router's placement and overhead on top of the workers.
class RouterTarget : public GenerationTarget {
 public:
  explicit RouterTarget(kvfleet::v1::Inference::StubInterface& stub) : stub_(stub) {}
  grpc::Status Stream(const LoadRequest& request, size_t index, const LoadOptions& options,
                      const OnMessage& on_message) override;

 private:
  kvfleet::v1::Inference::StubInterface& stub_;
};

// Sends every request once, `options.concurrency` at a time.
absl::StatusOr<LoadReport> RunLoad(GenerationTarget& target, const std::vector<LoadRequest>& requests,
                                   const LoadOptions& options);
// The same against a worker.
absl::StatusOr<LoadReport> RunLoad(kvfleet::v1::Worker::StubInterface& stub, const std::vector<LoadRequest>& requests,
                                   const LoadOptions& options);

// The GenerateRequest RunLoad sends a worker for `request` as number `index`.
kvfleet::v1::GenerateRequest ToGenerateRequest(const LoadRequest& request, size_t index, const LoadOptions& options);
// The same request for a router.
kvfleet::v1::GenerateTextRequest ToGenerateTextRequest(const LoadRequest& request, size_t index,
                                                       const LoadOptions& options);

}  // namespace kvfleet::load
