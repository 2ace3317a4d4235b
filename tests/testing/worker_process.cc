#include "tests/testing/worker_process.h"

#include "common/status_macros.h"
#include "tests/testing/service_process.h"

namespace kvfleet::testing {

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
  ASSIGN_OR_RETURN(StartedService started, StartServiceProcess("kvfleet-worker", options.binary, args,
                                                               options.stderr_path, options.ready_timeout));
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(started.process), std::move(started.address),
                                                          started.metrics_port, std::move(started.health_address),
                                                          std::move(started.kv_transfer_address)));
}

std::unique_ptr<kvfleet::v1::Worker::Stub> WorkerProcess::NewStub() const {
  return kvfleet::v1::Worker::NewStub(NewTestChannel(address_));
}

}  // namespace kvfleet::testing
