#include "tests/testing/service_process.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kvfleet::testing {

namespace {

// Enough of the service's log to show why it failed to start.
constexpr std::streamoff kStderrTailBytes = 4096;

std::string StderrTail(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::StrCat("\n(no stderr file at ", path, ")");
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kStderrTailBytes));
  std::stringstream tail;
  tail << in.rdbuf();
  return absl::StrCat("\nstderr (", path, ", last bytes):\n", tail.str());
}

// "<name> listening grpc=127.0.0.1:P metrics=127.0.0.1:Q" ->
// the gRPC address and the metrics port.
absl::Status ParseListeningLine(const std::string& line, std::string& address, int& metrics_port) {
  std::string metrics;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    if (absl::ConsumePrefix(&word, "grpc=")) address = std::string(word);
    if (absl::ConsumePrefix(&word, "metrics=")) metrics = std::string(word);
  }
  const size_t colon = metrics.rfind(':');
  if (address.empty() || colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(metrics).substr(colon + 1), &metrics_port) || metrics_port <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed listening line '", line, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StartedService> StartServiceProcess(const std::string& name, const std::string& binary,
                                                  const std::vector<std::string>& args,
                                                  const std::string& stderr_path, absl::Duration ready_timeout) {
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Start(binary, args, stderr_path));
  const absl::Time deadline = absl::Now() + ready_timeout;
  auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(name, " did not start: ", s.message(), StderrTail(stderr_path)));
  };
  absl::StatusOr<std::string> listening = child->WaitForLine(name + " listening ", deadline - absl::Now());
  if (!listening.ok()) return failed(listening.status());
  StartedService started;
  if (absl::Status s = ParseListeningLine(*listening, started.address, started.metrics_port); !s.ok()) {
    return failed(s);
  }
  absl::StatusOr<std::string> ready = child->WaitForLine(name + " ready", deadline - absl::Now());
  if (!ready.ok()) return failed(ready.status());
  started.process = std::move(child);
  return started;
}

std::shared_ptr<grpc::Channel> NewTestChannel(const std::string& address) {
  grpc::ChannelArguments args;
  // A channel-local subchannel pool: without it, channels to the same
  // address share one connection process-wide.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace kvfleet::testing
