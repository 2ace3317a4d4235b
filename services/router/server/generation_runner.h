// Runs one generation through the cluster: chooses a worker, streams its
// tokens to the client as text, and fails over.
//
// Attempts. A worker that fails before the first token (unreachable,
// draining, crashed) is excluded and the request goes to another, up to
// max_attempts failures in a row. A worker whose queue is full
// (RESOURCE_EXHAUSTED) is excluded too; when every worker refused, the
// client gets RESOURCE_EXHAUSTED at once, never a hang. A worker that dies
// mid-stream is replaced: the request is resumed on another worker with the
// tokens already streamed as resumed_output_token_ids, so the client sees
// no gap and no duplicate, and with greedy or seeded sampling the very
// tokens it would have seen (the worker counts them as output for
// max_tokens and penalties). Errors that are the request's own fault
// (INVALID_ARGUMENT, ...) go straight back to the client.
//
// A split (split_policy.h): the first attempt goes to a prefill worker with
// a lease id; it streams the first token and hands off. The next attempt
// goes to a decode worker, with that token as resumed output and the
// prefill worker as the peer to pull the prompt's KV from under the
// lease, so the client sees one stream. A prefill worker that fails
// before its token is retried as any worker would be; one that dies after
// it leaves the decode worker to compute what it could not pull.
//
// Each worker call inherits the client's call (CallContext::WorkerCall; for
// gRPC, ClientContext::FromServerContext): the client's deadline and
// cancellation reach the worker, which frees the request's KV blocks.
//
// The text (incremental detokenization and stop strings, TextStream) lives
// here, across attempts. A stop string ends the worker call by cancelling it.
//
// Thread-safety: Run may be called from many threads at once (one per call).
//
//   GenerationRunner runner(selector, pool, metrics, {});
//   grpc::Status s = runner.Run(context, plan, arrival, [&](const v1::GenerateTextResponse& r) { return
//   writer->Write(r); });
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "kvfleet/v1/inference.pb.h"
#include "services/router/frontend/router_model.h"
#include "services/router/server/call_context.h"
#include "services/router/server/generation_plan.h"
#include "services/router/server/route_selector.h"
#include "services/router/server/router_metrics.h"
#include "services/router/server/worker_pool.h"

namespace kvfleet::router {

struct GenerationRunnerOptions {
  // Failures in a row without a new token before the client gets UNAVAILABLE.
  int max_attempts = 3;
  // A split's first token goes to the client as soon as the prefill worker
  // has it, and the KV pull lands between it and the second token (a gap in
  // the stream). By default it is held until the decode worker streams, so
  // the pull counts in the time to first token and the stream is even, as
  // vLLM, Dynamo and llm-d deliver it.
  bool stream_first_token_before_handoff = false;
};

class GenerationRunner {
 public:
  using Clock = std::chrono::steady_clock;
  // Sends one message to the client; false when the client is gone.
  using Sink = std::function<bool(const v1::GenerateTextResponse&)>;

  GenerationRunner(RouteSelector& selector, WorkerPool& pool, RouterMetrics& metrics, GenerationRunnerOptions options);

  // The call's final status; every message before it went through `sink`,
  // the last one with finish_reason and usage. It goes to a worker of
  // plan.model, hashed with that model's fingerprint. `call` is the client's call,
  // from whichever front end (call_context.h).
  grpc::Status Run(const CallContext& call, const GenerationPlan& plan, Clock::time_point arrival, const Sink& sink);
  // The same for a gRPC server call.
  grpc::Status Run(const grpc::ServerContextBase& context, const GenerationPlan& plan, Clock::time_point arrival,
                   const Sink& sink) {
    return Run(GrpcCallContext(context), plan, arrival, sink);
  }

 private:
  struct Stream;  // one call's state across attempts (generation_runner.cc)
  enum class Outcome { kFinished, kHandedOff, kClientGone, kRequestError, kOverloaded, kWorkerFailed };

  Outcome RunAttempt(const CallContext& call, const Route& route, Stream& stream);
  // The client cancelled or its deadline passed.
  static bool ClientIsGone(const CallContext& call);
  // The status the client gets when the call ended without a final message.
  static grpc::Status ClientEnded(const CallContext& call);

  RouteSelector& selector_;
  WorkerPool& pool_;
  RouterMetrics& metrics_;
  const GenerationRunnerOptions options_;
};

}  // namespace kvfleet::router
