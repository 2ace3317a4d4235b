#include "tools/cluster/service_process.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kvfleet::cluster {

absl::StatusOr<ServiceEndpoints> ParseListeningLine(const std::string& line) {
  ServiceEndpoints endpoints;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    if (absl::ConsumePrefix(&word, "grpc=")) endpoints.grpc_address = std::string(word);
    if (absl::ConsumePrefix(&word, "metrics=")) endpoints.metrics_address = std::string(word);
    if (absl::ConsumePrefix(&word, "health=")) endpoints.health_address = std::string(word);
    if (absl::ConsumePrefix(&word, "http=")) endpoints.http_address = std::string(word);
    if (absl::ConsumePrefix(&word, "kvtransfer=")) endpoints.kv_transfer_address = std::string(word);
  }
  const std::string& metrics = endpoints.metrics_address;
  const size_t colon = metrics.rfind(':');
  if (endpoints.grpc_address.empty() || colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(metrics).substr(colon + 1), &endpoints.metrics_port) ||
      endpoints.metrics_port <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed listening line '", line, "'"));
  }
  return endpoints;
}

namespace {

constexpr absl::Duration kInterruptPoll = absl::Milliseconds(100);

// ChildProcess::WaitForLine until `deadline`, in slices between which
// `interrupted` is asked.
absl::StatusOr<std::string> WaitForLine(ChildProcess& child, const std::string& prefix, absl::Time deadline,
                                        const std::function<bool()>& interrupted) {
  if (!interrupted) return child.WaitForLine(prefix, deadline - absl::Now());
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    absl::StatusOr<std::string> line = child.WaitForLine(prefix, std::min(left, kInterruptPoll));
    if (!absl::IsDeadlineExceeded(line.status())) return line;
    if (left <= kInterruptPoll) {
      const std::vector<std::string> lines = child.StdoutLines();
      return absl::DeadlineExceededError(absl::StrCat("pid ", child.pid(), " printed no line starting with '", prefix,
                                                      "' in time; stdout lines: [", absl::StrJoin(lines, " | "), "]"));
    }
    if (interrupted()) return absl::CancelledError(absl::StrCat("interrupted while waiting for '", prefix, "'"));
  }
}

}  // namespace

absl::StatusOr<ServiceEndpoints> AwaitServiceReady(ChildProcess& child, const std::string& name, absl::Time deadline,
                                                   const std::function<bool()>& interrupted) {
  ASSIGN_OR_RETURN(const std::string listening, WaitForLine(child, name + " listening ", deadline, interrupted));
  ASSIGN_OR_RETURN(ServiceEndpoints endpoints, ParseListeningLine(listening));
  RETURN_IF_ERROR(WaitForLine(child, name + " ready", deadline, interrupted).status());
  return endpoints;
}

std::string LogTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::StrCat("(cannot read ", path, ")");
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - static_cast<std::streamoff>(max_bytes)));
  std::stringstream tail;
  tail << in.rdbuf();
  return tail.str();
}

}  // namespace kvfleet::cluster
