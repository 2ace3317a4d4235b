// The CallContext of a request on the HTTP port. HTTP carries no deadline,
// so the server sets one (--http-request-timeout); and nothing propagates a
// disconnect to the worker call the way gRPC's parent context does, so the
// front end calls Cancel when its client goes, which cancels the worker
// call in flight (the worker then frees the request's KV blocks) and any
// later one before it starts.
//
// Thread-safety: Cancel from any thread (the HTTP server's I/O thread);
// the rest as CallContext.
//
//   auto call = std::make_shared<HttpCallContext>(now + timeout);
//   responder.OnClientGone([call] { call->Cancel(); });
//   runner.Run(*call, plan, arrival, sink);
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "services/router/server/call_context.h"

namespace kvfleet::router {

class HttpCallContext final : public CallContext {
 public:
  explicit HttpCallContext(std::chrono::system_clock::time_point deadline) : deadline_(deadline) {}

  std::chrono::system_clock::time_point deadline() const override { return deadline_; }
  bool IsCancelled() const override { return cancelled_.load(); }

  std::shared_ptr<grpc::ClientContext> WorkerCall() const override {
    auto call = std::make_shared<grpc::ClientContext>();
    call->set_deadline(deadline_);
    std::lock_guard lock(mu_);
    current_ = call;
    // gRPC cancels a context cancelled before its call starts once it does.
    if (cancelled_.load()) call->TryCancel();
    return call;
  }

  void Cancel() {
    cancelled_.store(true);
    std::lock_guard lock(mu_);
    if (std::shared_ptr<grpc::ClientContext> call = current_.lock()) call->TryCancel();
  }

 private:
  const std::chrono::system_clock::time_point deadline_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::weak_ptr<grpc::ClientContext> current_;
};

}  // namespace kvfleet::router
