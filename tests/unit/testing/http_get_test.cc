#include "tests/testing/http_get.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace kvfleet::testing {
namespace {

// A one-shot server on an ephemeral port: accepts one connection, records
// the request, answers with a canned response (or nothing) and closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string response, bool answer = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, response = std::move(response), answer] { Serve(response, answer); });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // Valid once the client call returned.
  const std::string& request() const { return request_; }

 private:
  void Serve(const std::string& response, bool answer) {
    const int conn = ::accept(fd_, nullptr, nullptr);
    if (conn < 0) return;
    char buf[1024];
    while (request_.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(conn, buf, sizeof(buf));
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
    }
    if (answer) {
      EXPECT_EQ(::write(conn, response.data(), response.size()), static_cast<ssize_t>(response.size()));
    } else {
      // Hold the connection open without answering until the client gives up.
      while (::read(conn, buf, sizeof(buf)) > 0) {
      }
    }
    ::close(conn);
  }

  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

TEST(HttpGetTest, ReturnsTheBodyOf200) {
  OneShotServer server("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nmetric 1\nother 2\n");
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1", server.port(), "/metrics", absl::Seconds(10));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "metric 1\nother 2\n");
  EXPECT_EQ(server.request().rfind("GET /metrics HTTP/1.0\r\n", 0), 0u) << server.request();
}

TEST(HttpGetTest, Non200NamesTheStatusLine) {
  OneShotServer server("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1", server.port(), "/nope", absl::Seconds(10));
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("HTTP/1.1 404 Not Found"), std::string::npos) << body.status();
}

TEST(HttpGetTest, DecodesAChunkedBody) {
  OneShotServer server(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n");
  absl::StatusOr<std::string> body = HttpGet("localhost", server.port(), "/", absl::Seconds(10));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "hello world");
}

TEST(HttpGetTest, TimesOutOnASilentServer) {
  OneShotServer server("", /*answer=*/false);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1", server.port(), "/", absl::Milliseconds(200));
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(body.status())) << body.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(HttpGetTest, RefusedConnectionIsAnError) {
  int port = 0;
  {
    OneShotServer server("HTTP/1.0 200 OK\r\n\r\n");
    port = server.port();
    EXPECT_TRUE(HttpGet("127.0.0.1", port, "/", absl::Seconds(10)).ok());
  }
  EXPECT_FALSE(HttpGet("127.0.0.1", port, "/", absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace kvfleet::testing
