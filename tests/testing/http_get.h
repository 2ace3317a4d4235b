// A minimal HTTP client for tests: one GET over a fresh TCP connection
// (HTTP/1.0, so the server closes the connection after the body), enough to
// scrape a metrics endpoint without pulling an HTTP library into the tests.
//
// Owns nothing beyond the call. Invariant: the whole exchange, connect
// included, finishes within `timeout` or fails with DEADLINE_EXCEEDED.
// Thread-safety: safe to call from any thread.
//
//   ASSIGN_OR_RETURN(std::string body, HttpGet("127.0.0.1", port, "/metrics", absl::Seconds(5)));
//   ASSIGN_OR_RETURN(PrometheusScrape scrape, PrometheusScrape::Parse(body));
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvfleet::testing {

// Returns the response body of `GET path` from host:port. A status other
// than 200 is an error that quotes the status line; a chunked body is
// decoded.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path, absl::Duration timeout);

}  // namespace kvfleet::testing
