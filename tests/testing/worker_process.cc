#include "tests/testing/worker_process.h"

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

constexpr char kListeningPrefix[] = "kvfleet-worker listening ";
constexpr char kReadyLine[] = "kvfleet-worker ready";
// Enough of the worker's log to show why it failed to start.
constexpr std::streamoff kStderrTailBytes = 4096;

std::string StderrTail(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::StrCat("\n(no stderr file at ", path, ")");
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kStderrTailBytes));
  std::stringstream tail;
  tail << in.rdbuf();
  return absl::StrCat("\nworker stderr (", path, ", last bytes):\n", tail.str());
}

// "kvfleet-worker listening grpc=127.0.0.1:P metrics=127.0.0.1:Q" ->
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
    return absl::InvalidArgumentError(absl::StrCat("malformed worker line '", line, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WorkerProcessOptions::Validate() const {
  if (binary.empty()) return absl::InvalidArgumentError("WorkerProcessOptions.binary is empty");
  if (model_path.empty()) return absl::InvalidArgumentError("WorkerProcessOptions.model_path is empty");
  if (ready_timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("ready_timeout must be positive");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const WorkerProcessOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::vector<std::string> args = {"--model", options.model_path, "--listen", "127.0.0.1:0", "--metrics-port", "0"};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Start(options.binary, args, options.stderr_path));

  const absl::Time deadline = absl::Now() + options.ready_timeout;
  auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat("kvfleet-worker did not start: ", s.message(), StderrTail(options.stderr_path)));
  };
  absl::StatusOr<std::string> listening = child->WaitForLine(kListeningPrefix, deadline - absl::Now());
  if (!listening.ok()) return failed(listening.status());
  std::string address;
  int metrics_port = 0;
  if (absl::Status s = ParseListeningLine(*listening, address, metrics_port); !s.ok()) return failed(s);
  absl::StatusOr<std::string> ready = child->WaitForLine(kReadyLine, deadline - absl::Now());
  if (!ready.ok()) return failed(ready.status());
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(child), std::move(address), metrics_port));
}

std::unique_ptr<kvfleet::v1::Worker::Stub> WorkerProcess::NewStub() const {
  grpc::ChannelArguments args;
  // A channel-local subchannel pool: without it, channels to the same
  // address share one connection process-wide.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return kvfleet::v1::Worker::NewStub(grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args));
}

}  // namespace kvfleet::testing
