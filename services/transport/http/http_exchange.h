// The HTTP server's hand-over of one request's answer from the handler's
// thread to the connection's coroutine (http_server.cc, which alone
// includes this): the handler's Respond / StartStream / Write queue what to
// send and post a wake-up to the connection's strand; the coroutine takes
// all of it at once. Write blocks only while a megabyte is unsent.
//
// Thread-safety: the HttpResponder methods from the handler's thread;
// MarkGone and Next on the connection's strand.
#pragma once

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>  // before Asio: GCC 12 with Boost 1.74's coroutine headers

#include "services/transport/http/http_server.h"

namespace kvfleet::transport::http_internal {

namespace net = boost::asio;
using boost::system::error_code;

constexpr size_t kMaxQueuedBytes = 1 << 20;  // a stream's unsent bytes before Write blocks

// The handler's answer, handed from its thread to the connection's coroutine.
class Exchange final : public HttpResponder, public std::enable_shared_from_this<Exchange> {
 public:
  struct Head {
    int status = 200;
    std::string content_type;
    HttpHeaders headers;
  };
  // What the connection has to send next, taken at once.
  struct Work {
    std::optional<std::pair<Head, std::string>> whole;
    std::optional<Head> stream_head;
    std::string chunk;  // every Write since the last Take, concatenated
    bool done = false;
  };

  explicit Exchange(net::any_io_executor strand) : strand_(strand), wake_(strand) {
    wake_.expires_at(net::steady_timer::time_point::max());
  }

  void Respond(int status, std::string_view content_type, std::string body, HttpHeaders headers) override {
    std::lock_guard lock(mu_);
    if (answered_) return;
    answered_ = true;
    whole_.emplace(Head{status, std::string(content_type), std::move(headers)}, std::move(body));
    WakeLocked();
  }

  void StartStream(int status, std::string_view content_type, HttpHeaders headers) override {
    std::lock_guard lock(mu_);
    if (answered_) return;
    answered_ = true;
    streaming_ = true;
    stream_head_.emplace(Head{status, std::string(content_type), std::move(headers)});
    WakeLocked();
  }

  bool Write(std::string data) override {
    std::unique_lock lock(mu_);
    if (!streaming_) return !gone_;
    space_.wait(lock, [&] { return gone_ || queued_.size() < kMaxQueuedBytes; });
    if (gone_) return false;
    queued_ += data;
    WakeLocked();
    return true;
  }

  bool ClientGone() const override {
    std::lock_guard lock(mu_);
    return gone_;
  }

  void OnClientGone(std::function<void()> callback) override {
    {
      std::lock_guard lock(mu_);
      if (!gone_) {
        on_gone_ = std::move(callback);
        return;
      }
    }
    callback();
  }

  void HandlerDone() {
    std::lock_guard lock(mu_);
    done_ = true;
    WakeLocked();
  }

  // From the I/O thread: the client is gone (or the server gives up on it).
  void MarkGone() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mu_);
      if (gone_) return;
      gone_ = true;
      callback = std::move(on_gone_);
    }
    space_.notify_all();
    if (callback) callback();
  }

  // On the strand: waits until there is something to send.
  net::awaitable<Work> Next() {
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (whole_ || stream_head_ || !queued_.empty() || done_) {
          Work w;
          w.whole = std::move(whole_);
          w.stream_head = std::move(stream_head_);
          w.chunk = std::move(queued_);
          w.done = done_;
          whole_.reset();
          stream_head_.reset();
          queued_.clear();
          space_.notify_all();
          co_return w;
        }
      }
      // Whatever changes the state posts a cancel of this wait to the
      // strand, so it cannot run between the check above and the wait.
      error_code ec;
      co_await wake_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
  }

 private:
  void WakeLocked() {
    net::post(strand_, [self = shared_from_this()] { self->wake_.cancel(); });
  }

  net::any_io_executor strand_;
  net::steady_timer wake_;
  mutable std::mutex mu_;
  std::condition_variable space_;
  bool answered_ = false;
  bool streaming_ = false;
  bool done_ = false;
  bool gone_ = false;
  std::optional<std::pair<Head, std::string>> whole_;
  std::optional<Head> stream_head_;
  std::string queued_;
  std::function<void()> on_gone_;
};

}  // namespace kvfleet::transport::http_internal
