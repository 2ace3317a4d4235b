#include "tests/testing/http_get.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace kvfleet::testing {

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status PollUntil(int fd, short events, absl::Time deadline, const std::string& what) {
  while (true) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (r > 0) return absl::OkStatus();
    if (r == 0) return absl::DeadlineExceededError(absl::StrCat("HTTP GET timed out while ", what));
    if (errno != EINTR) return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
  }
}

absl::StatusOr<int> Connect(const std::string& host, int port, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (int err = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs); err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(err)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host));
  for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        last = PollUntil(fd, POLLOUT, deadline, "connecting");
        socklen_t len = sizeof(err);
        err = last.ok() ? (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : errno) : ETIMEDOUT;
      }
    }
    if (err == 0) {
      ::freeaddrinfo(addrs);
      return fd;
    }
    if (last.ok() || !absl::IsDeadlineExceeded(last)) {
      last = absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port, ": ", std::strerror(err)));
    }
    ::close(fd);
  }
  ::freeaddrinfo(addrs);
  return last;
}

absl::Status SendAll(int fd, const std::string& data, absl::Time deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    RETURN_IF_ERROR(PollUntil(fd, POLLOUT, deadline, "sending the request"));
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadToEof(int fd, absl::Time deadline) {
  std::string out;
  char buf[16384];
  while (true) {
    RETURN_IF_ERROR(PollUntil(fd, POLLIN, deadline, "reading the response"));
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Transfer-Encoding: chunked — hex size line, data, CRLF; a 0 size ends it.
absl::StatusOr<std::string> DecodeChunked(const std::string& body) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) return absl::DataLossError("chunked body: truncated size line");
    std::string size_text = body.substr(pos, eol - pos);
    size_text = size_text.substr(0, size_text.find(';'));  // drop chunk extensions
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size)) {
      return absl::DataLossError(absl::StrCat("chunked body: bad size line '", size_text, "'"));
    }
    if (size == 0) return out;
    pos = eol + 2;
    if (pos + size > body.size()) return absl::DataLossError("chunked body: truncated chunk");
    out.append(body, pos, size);
    pos += size + 2;
  }
}

absl::StatusOr<std::string> ParseResponse(const std::string& response) {
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) return absl::DataLossError("HTTP response without an end of headers");
  const std::vector<std::string> header_lines = absl::StrSplit(response.substr(0, header_end), "\r\n");
  const std::string& status_line = header_lines[0];
  const std::vector<std::string> parts = absl::StrSplit(status_line, absl::MaxSplits(' ', 2));
  if (parts.size() < 2 || !absl::StartsWith(parts[0], "HTTP/")) {
    return absl::DataLossError(absl::StrCat("malformed HTTP status line '", status_line, "'"));
  }
  if (parts[1] != "200") return absl::UnavailableError(absl::StrCat("HTTP GET answered '", status_line, "'"));
  std::string body = response.substr(header_end + 4);
  for (size_t i = 1; i < header_lines.size(); ++i) {
    const std::string lower = absl::AsciiStrToLower(header_lines[i]);
    if (absl::StartsWith(lower, "transfer-encoding:") && absl::StrContains(lower, "chunked")) {
      return DecodeChunked(body);
    }
  }
  return body;
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ASSIGN_OR_RETURN(int raw_fd, Connect(host, port, deadline));
  Fd fd(raw_fd);
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, ":", port, "\r\nConnection: close\r\n\r\n");
  RETURN_IF_ERROR(SendAll(fd.get(), request, deadline));
  ASSIGN_OR_RETURN(std::string response, ReadToEof(fd.get(), deadline));
  return ParseResponse(response);
}

}  // namespace kvfleet::testing
