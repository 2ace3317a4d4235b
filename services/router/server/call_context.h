// What the generation path needs of a client's call, whatever front end
// carries it (the gRPC Inference service; an HTTP front end translates into
// the same): when it must end, whether the client has gone, and a context
// for the worker call that inherits both, so the client's deadline and
// cancellation reach the worker, which frees the request's KV blocks.
//
// Thread-safety: IsCancelled and deadline may be called from any thread;
// WorkerCall from the thread running the generation.
//
//   GrpcCallContext call(server_context);
//   runner.Run(call, plan, arrival, sink);
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

namespace kvfleet::router {

class CallContext {
 public:
  virtual ~CallContext() = default;
  virtual std::chrono::system_clock::time_point deadline() const = 0;
  virtual bool IsCancelled() const = 0;
  // A context for one worker call: the client's deadline, and cancelled
  // when the client goes. Shared, so that a front end whose transport
  // does not propagate cancellation itself (HTTP) can keep a weak
  // reference and cancel the call in flight.
  virtual std::shared_ptr<grpc::ClientContext> WorkerCall() const = 0;
};

// A gRPC server call: the worker call is its child (FromServerContext), so
// gRPC propagates both the deadline and the cancellation.
class GrpcCallContext final : public CallContext {
 public:
  explicit GrpcCallContext(const grpc::ServerContextBase& context) : context_(context) {}
  std::chrono::system_clock::time_point deadline() const override { return context_.deadline(); }
  bool IsCancelled() const override { return context_.IsCancelled(); }
  std::shared_ptr<grpc::ClientContext> WorkerCall() const override {
    return grpc::ClientContext::FromServerContext(context_);
  }

 private:
  const grpc::ServerContextBase& context_;
};

}  // namespace kvfleet::router
