// A kvfleet-worker binary run as a child process for integration tests:
// started on ephemeral ports, waited for until its model is loaded, and
// reachable through fresh gRPC stubs.
//
// Owns the ChildProcess (killed with the object) and the addresses the
// worker reported. The worker's stdout protocol: first
//   kvfleet-worker listening grpc=127.0.0.1:PORT metrics=127.0.0.1:PORT
// once its gRPC server is bound (the model still loading), then
//   kvfleet-worker ready
// once health is SERVING. Invariant: a started WorkerProcess has printed both.
// Thread-safety: const methods are safe from any thread; process() hands
// out the ChildProcess, whose own rules apply.
//
//   ASSIGN_OR_RETURN(auto worker, WorkerProcess::Start({.binary = KVFLEET_WORKER_BINARY, .model_path = path}));
//   auto stub = worker->NewStub();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvfleet/v1/worker.grpc.pb.h"
#include "tests/testing/child_process.h"

namespace kvfleet::testing {

struct WorkerProcessOptions {
  std::string binary;                                 // path to kvfleet-worker; tests pass it from CMake
  std::string model_path;                             // GGUF file
  std::vector<std::string> extra_args;                // appended after --model/--listen/--metrics-port
  std::string stderr_path;                            // the worker's logs; empty: inherit this process's stderr
  absl::Duration ready_timeout = absl::Seconds(120);  // for both lines together

  absl::Status Validate() const;
};

class WorkerProcess {
 public:
  // Starts the worker with `--model PATH --listen 127.0.0.1:0 --metrics-port 0`
  // and the extra args, and returns once it printed "ready". Fails (with the
  // worker's stdout lines and the tail of its stderr file) if it exits first
  // or the timeout passes.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(const WorkerProcessOptions& options);

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT" of the gRPC server
  int metrics_port() const { return metrics_port_; }
  // The plaintext health-only address; empty unless extra_args had --health-port.
  const std::string& health_address() const { return health_address_; }
  // The KV transfer address; empty unless extra_args had --kv-transfer-listen.
  const std::string& kv_transfer_address() const { return kv_transfer_address_; }
  ChildProcess& process() { return *process_; }

  // A stub on a new channel that shares no connection with earlier ones, so
  // tests can close one connection without affecting another (insecure).
  std::unique_ptr<kvfleet::v1::Worker::Stub> NewStub() const;

 private:
  WorkerProcess(std::unique_ptr<ChildProcess> process, std::string address, int metrics_port,
                std::string health_address, std::string kv_transfer_address)
      : process_(std::move(process)),
        address_(std::move(address)),
        metrics_port_(metrics_port),
        health_address_(std::move(health_address)),
        kv_transfer_address_(std::move(kv_transfer_address)) {}

  std::unique_ptr<ChildProcess> process_;
  std::string address_;
  int metrics_port_;
  std::string health_address_;
  std::string kv_transfer_address_;
};

}  // namespace kvfleet::testing
