// An HTTP/1.1 server (Boost.Beast on Asio) for a service's REST front end:
// keep-alive, request size and time limits, TLS with the service's own
// certificate files, and responses either whole or streamed (chunked, for
// server-sent events). HTTP only: what a path means is the handler's.
//
// Threads. One I/O thread reads, parses and writes every connection
// (Asio, C++20 coroutines), so a thousand idle or streaming connections
// cost a thousand coroutines, not a thousand threads. Each request that
// parses is handed to the handler on a thread of its own (at most
// max_active_requests at once; beyond that the client gets 503 at once),
// because a handler may block for a whole generation. The handler answers
// through its HttpResponder, which hands the bytes to the I/O thread.
//
// The server answers on its own, without the handler, a request it cannot
// parse (400), one whose headers or body exceed the limits (431, 413), one
// beyond max_active_requests (503), a client certificate that names no
// allowed peer (403), and a handler that answered nothing or threw (500);
// `error_body` shapes those bodies. HTTP/1.0 clients get HTTP/1.0 answers
// (a stream unchunked, ended by closing the connection).
//
// A client gone. While a handler runs, the server keeps a read pending on
// the connection, so a client that disconnects is noticed at once, not at
// the next write; the responder's OnClientGone callback then runs (on the
// I/O thread: it must not block), e.g. to cancel the work the request
// started. Shutdown does the same for every request still running once its
// deadline passes.
//
// Thread-safety: Start and Shutdown from one thread; a responder from its
// handler's thread (OnClientGone's callback from the I/O thread).
//
//   ASSIGN_OR_RETURN(auto server, HttpServer::Start({.listen = "127.0.0.1:8000"},
//       [](const HttpRequest& r, HttpResponder& out) { out.Respond(200, "text/plain", "hi\n"); }));
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/transport/tls/tls_files.h"

namespace kvfleet::transport {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string path;     // the target up to '?', e.g. "/v1/models"
  std::string query;    // after '?', undecoded; empty if none
  HttpHeaders headers;  // as received; names compared case-insensitively by Header()
  std::string body;
  std::string peer;  // "127.0.0.1:53422", for logs

  // The first header of that name, case-insensitively; nullptr when absent.
  const std::string* Header(std::string_view name) const;
};

// A request's answer. Either Respond once, or StartStream then any number
// of Write; a stream ends when the handler returns. A handler that returns
// without either gets a 500.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // A whole response, sent with Content-Length.
  virtual void Respond(int status, std::string_view content_type, std::string body, HttpHeaders headers = {}) = 0;
  // The head of a streamed (chunked) response.
  virtual void StartStream(int status, std::string_view content_type, HttpHeaders headers = {}) = 0;
  // One chunk of the stream. Blocks only while much is already waiting to
  // be sent; false once the client is gone (what follows is dropped).
  virtual bool Write(std::string data) = 0;
  virtual bool ClientGone() const = 0;
  // `callback` runs once, on the I/O thread, when the client disconnects or
  // the server's shutdown deadline passes; at once if that already happened.
  virtual void OnClientGone(std::function<void()> callback) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpServerOptions {
  std::string listen;  // host:port; port 0 picks a free one
  // cert + key: HTTPS. client_ca: clients must present a certificate it
  // signed; allowed_peers (with client_ca): and it must name one of them.
  TlsFiles tls;
  std::vector<std::string> allowed_peers;
  // How often a new connection looks at the certificate and key files'
  // times; changed files are loaded for the connections after (a rotation
  // needs no restart, as on the gRPC port).
  std::chrono::milliseconds tls_reload_interval{kTlsRefreshSeconds * 1000};
  size_t max_header_bytes = 16 << 10;  // the request line and headers; over it: 431
  size_t max_body_bytes = 4 << 20;     // over it: 413
  // From a connection's first byte (or the end of its previous response) to
  // the end of the next request's headers: idle keep-alive connections and
  // slow clients are closed after it.
  std::chrono::milliseconds idle_timeout{60'000};
  // To receive a request's body once its headers are in.
  std::chrono::milliseconds body_timeout{60'000};
  int max_connections = 4096;      // beyond it, new connections are closed at once
  int max_active_requests = 1024;  // handlers running at once; beyond it: 503
  // The body of the server's own error responses (400, 403, 413, 431,
  // 500, 503), and a callback told each one's status (for metrics).
  std::function<std::string(int status, std::string_view message)> error_body;
  std::string error_content_type = "text/plain";
  std::function<void(int status)> on_server_answer;
};

class HttpServer {
 public:
  // Binds and starts serving; INVALID_ARGUMENT for a bad address or TLS
  // file (naming it), UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  virtual ~HttpServer() = default;

  // "127.0.0.1:8000", with the port actually bound.
  virtual const std::string& address() const = 0;
  virtual int port() const = 0;
  // Stops accepting; requests in flight have until `deadline` to finish,
  // then their clients count as gone (OnClientGone). Returns once every
  // handler has returned and every connection (idle ones too) is closed.
  virtual void Shutdown(std::chrono::system_clock::time_point deadline) = 0;
};

// The HTTP reason phrase of a status ("Not Found"), for messages.
std::string_view HttpReason(int status);

}  // namespace kvfleet::transport
