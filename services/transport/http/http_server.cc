// Boost.Beast lives in this one translation unit (it is slow to compile).
// GCC 12 with Boost 1.74's coroutine headers needs <utility> first.
#include "services/transport/http/http_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "services/transport/http/http_exchange.h"
#include "services/transport/http/http_tls_context.h"

namespace kvfleet::transport {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using http_internal::Exchange;

std::string ErrorText(int status, std::string_view message) {
  return absl::StrCat(status, " ", std::string(HttpReason(status)), ": ", std::string(message), "\n");
}

// Splits "HOST:PORT" (or "[v6]:PORT").
absl::StatusOr<tcp::endpoint> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listen address '", listen, "' is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "*") host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address '", listen, "': '", host, "' is not an IP address"));
  }
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

std::string EndpointText(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return e.address().is_v6() ? absl::StrCat("[", host, "]:", e.port()) : absl::StrCat(host, ":", e.port());
}

class BeastHttpServer final : public HttpServer {
 public:
  BeastHttpServer(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)), acceptor_(ioc_) {
    if (!options_.error_body) options_.error_body = ErrorText;
  }

  ~BeastHttpServer() override { Shutdown(std::chrono::system_clock::now()); }

  absl::Status Bind() {
    if (options_.tls.serves_tls()) {
      absl::StatusOr<HttpTlsContext> tls =
          HttpTlsContext::Create(options_.tls, options_.allowed_peers, options_.tls_reload_interval);
      if (!tls.ok()) return tls.status();
      tls_.emplace(*std::move(tls));
    }
    absl::StatusOr<tcp::endpoint> endpoint = ParseListen(options_.listen);
    if (!endpoint.ok()) return endpoint.status();
    error_code ec;
    acceptor_.open(endpoint->protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(*endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.listen, ": ", ec.message()));
    }
    bound_ = acceptor_.local_endpoint();
    address_ = EndpointText(bound_);
    net::co_spawn(ioc_, Accept(), LogIfThrew);
    io_thread_ = std::thread([this] { ioc_.run(); });
    return absl::OkStatus();
  }

  const std::string& address() const override { return address_; }
  int port() const override { return bound_.port(); }

  void Shutdown(std::chrono::system_clock::time_point deadline) override {
    if (stopped_.exchange(true)) return;
    net::post(ioc_, [this] {
      error_code ignored;
      acceptor_.close(ignored);
    });
    std::unique_lock lock(mu_);
    if (!idle_.wait_until(lock, deadline, [&] { return active_requests_ == 0; })) {
      KVFLEET_LOG_WARN("HTTP: {} requests still running at the shutdown deadline; ending them", active_requests_);
      for (const std::weak_ptr<Exchange>& weak : running_) {
        if (std::shared_ptr<Exchange> e = weak.lock()) net::post(ioc_, [e] { e->MarkGone(); });
      }
      idle_.wait(lock, [&] { return active_requests_ == 0; });
    }
    // The last answers have a moment to reach their clients; then every
    // connection, idle keep-alive ones included, is closed, so a pooled
    // client learns at once to go elsewhere.
    idle_.wait_for(lock, std::chrono::seconds(2), [&] { return sending_ == 0; });
    lock.unlock();
    net::post(ioc_, [this] {
      for (const std::weak_ptr<ConnectionBase>& weak : live_) {
        if (std::shared_ptr<ConnectionBase> c = weak.lock()) c->Close();
      }
    });
    for (int i = 0; i < 200 && connections_ > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ioc_.stop();
    if (io_thread_.joinable()) io_thread_.join();
  }

 private:
  // What Shutdown needs of a connection of either stream type.
  struct ConnectionBase {
    virtual ~ConnectionBase() = default;
    virtual void Close() = 0;
  };

  template <class Stream>
  struct Connection final : ConnectionBase {
    // `tls`: the context a TLS stream uses (null for plain TCP), kept
    // alive here because a reload replaces the server's. `open` counts the
    // server's open connections while this one lives.
    template <class... Args>
    explicit Connection(std::atomic<int>& open, std::shared_ptr<ssl::context> tls, Args&&... args)
        : open_count(open),
          tls_context(std::move(tls)),
          stream(std::forward<Args>(args)...),
          watch_end(stream.get_executor()) {
      ++open_count;
    }
    ~Connection() override { --open_count; }
    void Close() override {
      error_code ignored;
      Lowest(stream).socket().close(ignored);
      broken = true;
    }
    std::atomic<int>& open_count;
    std::shared_ptr<ssl::context> tls_context;
    Stream stream;
    beast::flat_buffer buffer;
    std::string peer;
    bool peer_allowed = true;
    bool watching = false;
    bool broken = false;
    net::steady_timer watch_end;
  };

  enum class Sent { kAnswered, kNoAnswer, kClientGone };

  static beast::tcp_stream& Lowest(beast::tcp_stream& s) { return s; }
  static beast::tcp_stream& Lowest(beast::ssl_stream<beast::tcp_stream>& s) { return beast::get_lowest_layer(s); }

  // For co_spawn: a coroutine that throws is logged, not silently dropped.
  static void LogIfThrew(std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      KVFLEET_LOG_ERROR("HTTP: a connection ended on an exception: {}", x.what());
    }
  }

  net::awaitable<void> Accept() {
    net::steady_timer backoff(ioc_);
    for (;;) {
      error_code ec;
      tcp::socket socket =
          co_await acceptor_.async_accept(net::make_strand(ioc_), net::redirect_error(net::use_awaitable, ec));
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
      if (ec) {
        // Out of file descriptors, say: retrying at once would spin.
        KVFLEET_LOG_WARN("HTTP: accept failed: {}; retrying in 50 ms", ec.message());
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(net::redirect_error(net::use_awaitable, ec));
        continue;
      }
      if (connections_ >= options_.max_connections) {
        KVFLEET_LOG_WARN("HTTP: {} connections open, the limit; closing a new one", connections_.load());
        socket.close(ec);
        continue;
      }
      // Tokens go out as they come, in small writes: Nagle's algorithm would
      // hold each behind the client's delayed ACK (40 ms on Linux).
      socket.set_option(tcp::no_delay(true), ec);
      const auto executor = socket.get_executor();
      std::erase_if(live_, [](const std::weak_ptr<ConnectionBase>& w) { return w.expired(); });
      if (tls_.has_value()) {
        std::shared_ptr<ssl::context> tls = tls_->Current();
        auto c = std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(connections_, tls,
                                                                                    std::move(socket), *tls);
        live_.push_back(c);
        net::co_spawn(executor, ServeTls(c), LogIfThrew);
      } else {
        auto c = std::make_shared<Connection<beast::tcp_stream>>(connections_, nullptr, std::move(socket));
        live_.push_back(c);
        net::co_spawn(executor, Serve(c), LogIfThrew);
      }
    }
  }

  net::awaitable<void> ServeTls(std::shared_ptr<Connection<beast::ssl_stream<beast::tcp_stream>>> c) {
    error_code ec;
    Lowest(c->stream).expires_after(options_.idle_timeout);
    co_await c->stream.async_handshake(ssl::stream_base::server, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      KVFLEET_LOG_DEBUG("HTTP: TLS handshake failed: {}", ec.message());
      co_return;
    }
    c->peer_allowed = tls_->PeerAllowed(c->stream.native_handle());
    co_await Serve(c);
    if (!c->broken) {
      // close_notify, so the client can tell the end from a truncation.
      Lowest(c->stream).expires_after(std::chrono::seconds(2));
      co_await c->stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
    }
  }

  template <class Stream>
  net::awaitable<void> Serve(std::shared_ptr<Connection<Stream>> c) {
    error_code ec;
    const tcp::endpoint remote = Lowest(c->stream).socket().remote_endpoint(ec);
    c->peer = ec ? "unknown" : EndpointText(remote);
    while (!c->broken) {
      const bool keep_alive = co_await ServeOne(c);
      if (!keep_alive) break;
    }
    // TLS half-closes with its close_notify instead (ServeTls).
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      if (!c->broken) Lowest(c->stream).socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  }

  template <class Stream>
  net::awaitable<void> SendError(Connection<Stream>& c, int status, std::string_view message, bool keep_alive) {
    if (options_.on_server_answer) options_.on_server_answer(status);
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, options_.error_content_type);
    res.body() = options_.error_body(status, message);
    res.keep_alive(keep_alive);
    res.prepare_payload();
    error_code ec;
    Lowest(c.stream).expires_after(options_.body_timeout);
    co_await http::async_write(c.stream, res, net::redirect_error(net::use_awaitable, ec));
    Lowest(c.stream).expires_never();
    if (ec) c.broken = true;
    if (!keep_alive && !c.broken) co_await Linger(c);
  }

  // Before closing on a request the server refused unread (a body over
  // the limit), reads and drops what the client is still sending for a
  // moment, so that its kernel does not answer the rest with a reset that
  // would destroy the error response before the client reads it.
  template <class Stream>
  net::awaitable<void> Linger(Connection<Stream>& c) {
    error_code ec;
    Lowest(c.stream).socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 16 << 10> sink;
    size_t dropped = 0;
    Lowest(c.stream).expires_after(std::chrono::seconds(2));
    while (!ec && dropped < (64u << 20)) {
      dropped +=
          co_await Lowest(c.stream).async_read_some(net::buffer(sink), net::redirect_error(net::use_awaitable, ec));
    }
    c.broken = true;  // nothing more to say on it
  }

  // One request and its answer; true when the connection may take another.
  template <class Stream>
  net::awaitable<bool> ServeOne(std::shared_ptr<Connection<Stream>> c) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser.body_limit(options_.max_body_bytes);
    error_code ec;
    Lowest(c->stream).expires_after(options_.idle_timeout);
    co_await http::async_read_header(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
    if (!ec && parser.get()[http::field::expect] == "100-continue" && parser.content_length().value_or(0) > 0) {
      http::response<http::empty_body> go_on{http::status::continue_, 11};
      co_await http::async_write(c->stream, go_on, net::redirect_error(net::use_awaitable, ec));
    }
    if (!ec && !parser.is_done()) {
      Lowest(c->stream).expires_after(options_.body_timeout);
      co_await http::async_read(c->stream, c->buffer, parser, net::redirect_error(net::use_awaitable, ec));
    }
    Lowest(c->stream).expires_never();
    if (ec == http::error::header_limit) {
      co_await SendError(
          *c, 431, absl::StrCat("the request line and headers exceed ", options_.max_header_bytes, " bytes"), false);
      co_return false;
    }
    if (ec == http::error::body_limit) {
      co_await SendError(*c, 413, absl::StrCat("the request body exceeds ", options_.max_body_bytes, " bytes"), false);
      co_return false;
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == ssl::error::stream_truncated) {
      c->broken = ec != http::error::end_of_stream && ec != net::error::eof;
      co_return false;
    }
    if (ec) {
      co_await SendError(*c, 400, absl::StrCat("malformed HTTP request: ", ec.message()), false);
      co_return false;
    }
    http::request<http::string_body> message = parser.release();
    const bool keep_alive = message.keep_alive();
    const unsigned version = message.version();
    if (!c->peer_allowed) {
      co_await SendError(*c, 403, "the client certificate does not name a peer this server allows", false);
      co_return false;
    }
    HttpRequest request;
    request.method = std::string(message.method_string());
    const std::string_view target(message.target().data(), message.target().size());
    const size_t question = target.find('?');
    request.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
    for (const auto& field : message) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(message.body());
    request.peer = c->peer;

    auto exchange = std::make_shared<Exchange>(c->stream.get_executor());
    if (!StartHandler(std::move(request), exchange)) {
      co_await SendError(*c, 503,
                         absl::StrCat("the server is at its limit of ", options_.max_active_requests,
                                      " requests in progress; retry later"),
                         keep_alive);
      co_return keep_alive && !c->broken;
    }
    {
      std::lock_guard lock(mu_);
      ++sending_;
    }
    absl::Cleanup sent_all = [this] {
      {
        std::lock_guard lock(mu_);
        --sending_;
      }
      idle_.notify_all();
    };
    c->watching = true;
    c->watch_end.expires_at(net::steady_timer::time_point::max());
    net::co_spawn(c->stream.get_executor(), Watch(c, exchange), LogIfThrew);
    const Sent sent = co_await Send(*c, *exchange, keep_alive, version);
    if (c->watching) {
      Lowest(c->stream).socket().cancel(ec);
      while (c->watching) co_await c->watch_end.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    if (sent == Sent::kNoAnswer && !c->broken) {
      co_await SendError(*c, 500, "the server gave no answer to this request", false);
      co_return false;
    }
    co_return sent == Sent::kAnswered&& keep_alive&& version >= 11 && !c->broken;
  }

  // While the handler runs: the client closing its side (or sending the next
  // request early: then the bytes are kept and the watch ends).
  template <class Stream>
  net::awaitable<void> Watch(std::shared_ptr<Connection<Stream>> c, std::shared_ptr<Exchange> exchange) {
    error_code ec;
    const size_t n =
        co_await c->stream.async_read_some(c->buffer.prepare(4096), net::redirect_error(net::use_awaitable, ec));
    if (!ec) {
      c->buffer.commit(n);
    } else if (ec != net::error::operation_aborted) {
      c->broken = true;
      exchange->MarkGone();
    }
    c->watching = false;
    c->watch_end.cancel();
  }

  // Sends what the handler produces until it returns. Each write has
  // body_timeout (a client that stops reading is dropped); between writes
  // the stream has no expiry, since a generation may be silent for long.
  // An HTTP/1.0 client's stream is not chunked: it ends when the
  // connection closes.
  template <class Stream>
  net::awaitable<Sent> Send(Connection<Stream>& c, Exchange& exchange, bool keep_alive, unsigned version) {
    std::optional<http::response<http::empty_body>> head;
    const bool chunked = version >= 11;
    error_code ec;
    auto guarded = net::redirect_error(net::use_awaitable, ec);
    for (;;) {
      Exchange::Work work = co_await exchange.Next();
      Lowest(c.stream).expires_after(options_.body_timeout);
      if (work.whole) {
        auto& [h, body] = *work.whole;
        http::response<http::string_body> res{static_cast<http::status>(h.status), version};
        res.set(http::field::content_type, h.content_type);
        for (auto& [name, value] : h.headers) res.insert(name, value);
        res.body() = std::move(body);
        res.keep_alive(keep_alive);
        res.prepare_payload();
        co_await http::async_write(c.stream, res, guarded);
        break;
      }
      if (work.stream_head) {
        head.emplace(static_cast<http::status>(work.stream_head->status), version);
        head->set(http::field::content_type, work.stream_head->content_type);
        for (auto& [name, value] : work.stream_head->headers) head->insert(name, value);
        head->keep_alive(keep_alive && chunked);
        head->chunked(chunked);
        http::response_serializer<http::empty_body> serializer(*head);
        co_await http::async_write_header(c.stream, serializer, guarded);
        if (ec) break;
      }
      if (head && !work.chunk.empty()) {
        if (chunked) {
          co_await net::async_write(c.stream, http::make_chunk(net::buffer(work.chunk)), guarded);
        } else {
          co_await net::async_write(c.stream, net::buffer(work.chunk), guarded);
        }
        if (ec) break;
      }
      if (work.done) {
        Lowest(c.stream).expires_never();
        if (!head) co_return Sent::kNoAnswer;
        if (chunked) co_await net::async_write(c.stream, http::make_chunk_last(), guarded);
        break;
      }
      Lowest(c.stream).expires_never();
    }
    Lowest(c.stream).expires_never();
    if (ec) {
      c.broken = true;
      exchange.MarkGone();
      co_return Sent::kClientGone;
    }
    co_return Sent::kAnswered;
  }

  bool StartHandler(HttpRequest request, std::shared_ptr<Exchange> exchange) {
    {
      std::lock_guard lock(mu_);
      if (stopped_ || active_requests_ >= options_.max_active_requests) return false;
      ++active_requests_;
      std::erase_if(running_, [](const std::weak_ptr<Exchange>& w) { return w.expired(); });
      running_.push_back(exchange);
    }
    try {
      std::thread([this, request = std::move(request), exchange = std::move(exchange)]() mutable {
        {
          // Both go before the count drops, so nothing outlives the server.
          HttpRequest own = std::move(request);
          std::shared_ptr<Exchange> e = std::move(exchange);
          try {
            handler_(own, *e);
          } catch (const std::exception& x) {
            KVFLEET_LOG_ERROR("HTTP: the handler of {} {} threw: {}", own.method, own.path, x.what());
            e->Respond(500, options_.error_content_type,
                       options_.error_body(500, "the server failed on this request; it is logged"), {});
          }
          e->HandlerDone();
        }
        std::lock_guard lock(mu_);
        --active_requests_;
        idle_.notify_all();
      }).detach();
    } catch (const std::system_error& x) {
      // No thread to be had (a process limit): the client hears 503.
      KVFLEET_LOG_ERROR("HTTP: cannot start a thread for a request: {}", x.what());
      std::lock_guard lock(mu_);
      --active_requests_;
      idle_.notify_all();
      return false;
    }
    return true;
  }

  HttpServerOptions options_;
  HttpHandler handler_;
  // The counters and their lock go before the I/O context: a coroutine
  // frame the context destroys last may still update them.
  std::mutex mu_;
  std::condition_variable idle_;
  int active_requests_ = 0;                       // guarded by mu_
  int sending_ = 0;                               // guarded by mu_
  std::vector<std::weak_ptr<Exchange>> running_;  // guarded by mu_
  std::atomic<bool> stopped_{false};
  std::atomic<int> connections_{0};
  std::optional<HttpTlsContext> tls_;  // before the I/O context: its streams use its contexts
  net::io_context ioc_{1};
  tcp::acceptor acceptor_;
  tcp::endpoint bound_;
  std::string address_;
  std::thread io_thread_;
  std::vector<std::weak_ptr<ConnectionBase>> live_;  // the I/O thread's only
};

}  // namespace

const std::string* HttpRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (absl::EqualsIgnoreCase(n, std::string(name))) return &v;
  }
  return nullptr;
}

std::string_view HttpReason(int status) {
  const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
  return std::string_view(reason.data(), reason.size());
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto server = std::make_unique<BeastHttpServer>(std::move(options), std::move(handler));
  if (absl::Status s = server->Bind(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace kvfleet::transport
