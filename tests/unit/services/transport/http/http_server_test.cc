// The HTTP server over real loopback sockets, with a client that writes
// raw HTTP/1.1 so the framing itself is what is checked.
#include "services/transport/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace kvfleet::transport {
namespace {

struct Response {
  int status = 0;
  HttpHeaders headers;
  std::string body;  // chunked bodies decoded
  std::vector<std::string> chunks;
  bool closed = false;  // the server closed instead of answering

  const std::string* Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (absl::EqualsIgnoreCase(n, std::string(name))) return &v;
    }
    return nullptr;
  }
};

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }
  void Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }
  Response Read() {
    Response r;
    std::string line;
    if (!ReadLine(line)) {
      r.closed = true;
      return r;
    }
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &r.status)) return r;
    while (ReadLine(line) && !line.empty()) {
      const size_t colon = line.find(':');
      r.headers.emplace_back(line.substr(0, colon), std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
    }
    if (const std::string* length = r.Header("content-length")) {
      size_t n = 0;
      (void)absl::SimpleAtoi(*length, &n);
      r.body = ReadBytes(n);
    } else if (const std::string* te = r.Header("transfer-encoding"); te != nullptr && *te == "chunked") {
      for (;;) {
        if (!ReadLine(line)) break;
        size_t n = 0;
        if (!absl::SimpleHexAtoi(line, &n)) break;
        std::string chunk = ReadBytes(n);
        ReadLine(line);
        if (n == 0) break;
        r.chunks.push_back(chunk);
        r.body += chunk;
      }
    }
    return r;
  }
  // What is left on the connection until the server closes it.
  std::string ReadToEnd() {
    while (Fill()) {
    }
    return std::exchange(buffer_, std::string());
  }
  // True when the server closes the connection within `limit` (a bound on
  // a hang, not a measurement).
  bool ClosedWithin(std::chrono::seconds limit) {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(limit.count() * 1000)) != 1) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }
  // True once the server has closed the connection (reads EOF).
  bool ServerClosed() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  bool Fill() {
    char data[4096];
    const ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n <= 0) return false;
    buffer_.append(data, static_cast<size_t>(n));
    return true;
  }
  bool ReadLine(std::string& line) {
    for (;;) {
      const size_t end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return true;
      }
      if (!Fill()) return false;
    }
  }
  std::string ReadBytes(size_t n) {
    while (buffer_.size() < n && Fill()) {
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, std::min(n, buffer_.size()));
    return out;
  }
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

std::unique_ptr<HttpServer> StartOrDie(HttpServerOptions options, HttpHandler handler) {
  if (options.listen.empty()) options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string Post(std::string_view path, std::string_view body, std::string_view extra = "") {
  return absl::StrCat("POST ", std::string(path), " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n",
                      std::string(extra), "\r\n", std::string(body));
}

TEST(HttpServerTest, AnswersWholeResponsesOnOneKeptAliveConnection) {
  auto server = StartOrDie({}, [](const HttpRequest& r, HttpResponder& out) {
    const std::string* custom = r.Header("x-custom");
    out.Respond(200, "text/plain",
                absl::StrCat(r.method, " ", r.path, " ?", r.query, " ", r.body, " ", custom ? *custom : "-"),
                {{"X-Answer", "42"}});
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  client.Send(Post("/echo?a=1", "hello", "X-CUSTOM: yes\r\n"));
  Response first = client.Read();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "POST /echo ?a=1 hello yes");
  ASSERT_NE(first.Header("x-answer"), nullptr);
  EXPECT_EQ(*first.Header("x-answer"), "42");
  client.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().body, "GET /again ?  -");  // no query, no body
}

TEST(HttpServerTest, StreamsChunksAsTheHandlerWritesThem) {
  auto server = StartOrDie({}, [](const HttpRequest&, HttpResponder& out) {
    out.StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(out.Write(absl::StrCat("data: ", i, "\n\n")));
  });
  RawClient client(server->port());
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  Response r = client.Read();
  EXPECT_EQ(r.status, 200);
  ASSERT_NE(r.Header("content-type"), nullptr);
  EXPECT_EQ(*r.Header("content-type"), "text/event-stream");
  EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  EXPECT_FALSE(r.chunks.empty());
  // The connection is still usable after the last chunk.
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST(HttpServerTest, RefusesOversizedBodiesAndHeadersWithoutCallingTheHandler) {
  std::atomic<int> calls{0};
  HttpServerOptions options{.max_header_bytes = 1024, .max_body_bytes = 100};
  options.error_body = [](int status, std::string_view message) {
    return absl::StrCat("{\"status\":", status, ",\"message\":\"", std::string(message), "\"}");
  };
  options.error_content_type = "application/json";
  auto server = StartOrDie(options, [&](const HttpRequest&, HttpResponder& out) {
    ++calls;
    out.Respond(200, "text/plain", "ok");
  });
  {
    RawClient client(server->port());
    client.Send(Post("/big", std::string(101, 'x')));
    Response r = client.Read();
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(r.body.find("exceeds 100 bytes"), std::string::npos) << r.body;
    ASSERT_NE(r.Header("content-type"), nullptr);
    EXPECT_EQ(*r.Header("content-type"), "application/json");
  }
  {
    RawClient client(server->port());
    client.Send(absl::StrCat("GET / HTTP/1.1\r\nX-Long: ", std::string(2000, 'y'), "\r\n\r\n"));
    EXPECT_EQ(client.Read().status, 431);
  }
  {
    RawClient client(server->port());
    client.Send("NOT HTTP AT ALL\r\n\r\n");
    EXPECT_EQ(client.Read().status, 400);
  }
  EXPECT_EQ(calls.load(), 0);
  // A body at the limit is served.
  RawClient client(server->port());
  client.Send(Post("/fits", std::string(100, 'x')));
  EXPECT_EQ(client.Read().status, 200);
}

// A handler that blocks until its client is gone, as a generation does.
struct BlockingHandler {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool gone = false;
  bool write_failed = false;

  void operator()(const HttpRequest&, HttpResponder& out) {
    out.StartStream(200, "text/event-stream");
    out.Write("data: first\n\n");
    out.OnClientGone([this] {
      std::lock_guard lock(mu);
      gone = true;
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return gone; });
    lock.unlock();
    write_failed = !out.Write("data: after\n\n") && out.ClientGone();
  }
  void AwaitStarted() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  bool AwaitGone(std::chrono::seconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return gone; });
  }
};

TEST(HttpServerTest, AClientThatDisconnectsIsNoticedWithoutAWrite) {
  BlockingHandler handler;
  auto server = StartOrDie({}, std::ref(handler));
  {
    RawClient client(server->port());
    client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    handler.AwaitStarted();
  }  // the client closes while the handler waits
  EXPECT_TRUE(handler.AwaitGone(std::chrono::seconds(10)));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(handler.write_failed);
}

TEST(HttpServerTest, ShutdownEndsRequestsStillRunningAtItsDeadline) {
  BlockingHandler handler;
  auto server = StartOrDie({}, std::ref(handler));
  RawClient client(server->port());
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  handler.AwaitStarted();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  EXPECT_TRUE(handler.gone);
}

TEST(HttpServerTest, RequestsBeyondTheActiveLimitGet503) {
  BlockingHandler handler;
  auto server = StartOrDie({.max_active_requests = 1}, std::ref(handler));
  RawClient busy(server->port());
  busy.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  handler.AwaitStarted();
  RawClient second(server->port());
  second.Send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
  Response r = second.Read();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("limit of 1 requests"), std::string::npos) << r.body;
  busy.Close();
  EXPECT_TRUE(handler.AwaitGone(std::chrono::seconds(10)));
}

TEST(HttpServerTest, AHandlerThatNeverAnswersGives500) {
  auto server = StartOrDie({}, [](const HttpRequest&, HttpResponder&) {});
  RawClient client(server->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().status, 500);
}

TEST(HttpServerTest, AHandlerThatThrowsGives500AndTheServerServesOn) {
  std::atomic<int> calls{0};
  auto server = StartOrDie({}, [&](const HttpRequest&, HttpResponder& out) {
    if (calls++ == 0) throw std::runtime_error("boom");
    out.Respond(200, "text/plain", "fine");
  });
  RawClient first(server->port());
  first.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(first.Read().status, 500);
  RawClient second(server->port());
  second.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(second.Read().body, "fine");
}

TEST(HttpServerTest, AnHttp10ClientGetsAnUnchunkedStreamEndedByClosing) {
  auto server = StartOrDie({}, [](const HttpRequest&, HttpResponder& out) {
    out.StartStream(200, "text/event-stream");
    out.Write("data: a\n\n");
    out.Write("data: b\n\n");
  });
  RawClient client(server->port());
  client.Send("GET /stream HTTP/1.0\r\n\r\n");
  Response r = client.Read();  // the head; the body has no framing to read by
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("transfer-encoding"), nullptr);
  EXPECT_EQ(client.ReadToEnd(), "data: a\n\ndata: b\n\n");
}

TEST(HttpServerTest, ShutdownClosesIdleKeptAliveConnections) {
  auto server = StartOrDie({.idle_timeout = std::chrono::minutes(10)},
                           [](const HttpRequest&, HttpResponder& out) { out.Respond(200, "text/plain", "ok"); });
  RawClient client(server->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().status, 200);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // Closed by the shutdown, long before its 10-minute idle timeout.
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(30)));
}

TEST(HttpServerTest, IdleConnectionsAreClosedAfterTheIdleTimeout) {
  auto server = StartOrDie({.idle_timeout = std::chrono::milliseconds(200)},
                           [](const HttpRequest&, HttpResponder& out) { out.Respond(200, "text/plain", "ok"); });
  RawClient client(server->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().status, 200);
  EXPECT_TRUE(client.ServerClosed());  // blocks until the timeout closes it
}

TEST(HttpServerTest, BadListenAddressesAndTlsFilesAreRefusedAtStart) {
  auto handler = [](const HttpRequest&, HttpResponder& out) { out.Respond(200, "text/plain", "ok"); };
  absl::StatusOr<std::unique_ptr<HttpServer>> bad = HttpServer::Start({.listen = "nowhere"}, handler);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  bad = HttpServer::Start({.listen = "127.0.0.1:0", .tls = {.cert = "/no/such.pem", .key = "/no/such.key"}}, handler);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("/no/such.pem"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace kvfleet::transport
