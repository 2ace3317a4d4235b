// A kvfleet service binary (kvfleet-worker, kvfleet-cachemanager, …) run as
// a child process for integration tests. Every service prints
//   <name> listening grpc=HOST:PORT metrics=HOST:PORT
// once bound, then
//   <name> ready
// once it serves; StartServiceProcess waits for both.
//
//   ASSIGN_OR_RETURN(StartedService cm, StartServiceProcess("kvfleet-cachemanager", binary, args, log, absl::Seconds(30)));
//   auto stub = v1::CacheManager::NewStub(NewTestChannel(cm.address));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/child_process.h"

namespace kvfleet::testing {

// Where a service binary is: `built_path` (the build tree's, compiled in),
// or $KVFLEET_BIN_DIR/<name> when that is set (packed binaries on a machine
// without the build tree: scripts/gpu_check.sh).
std::string ServiceBinary(const std::string& name, const std::string& built_path);

struct StartedService {
  std::unique_ptr<ChildProcess> process;
  std::string address;  // the gRPC address it bound
  int metrics_port = 0;
  std::string health_address;  // empty unless started with --health-port
  std::string kv_transfer_address;  // a worker's; empty unless started with --kv-transfer-listen
};

// Fails (quoting its stdout lines and the tail of `stderr_path`) if the
// process exits first or `ready_timeout` passes.
absl::StatusOr<StartedService> StartServiceProcess(const std::string& name, const std::string& binary,
                                                  const std::vector<std::string>& args,
                                                  const std::string& stderr_path, absl::Duration ready_timeout);

// grpc.health.v1 Check of `service` ("" is the whole server) at `address`:
// true for SERVING, false for NOT_SERVING, an error when the call fails
// (NOT_FOUND for a name the server does not know).
absl::StatusOr<bool> HealthServing(const std::string& address, const std::string& service);

// A channel with its own connection (not shared with other channels to the
// same address), so a test can break one without touching the others.
std::shared_ptr<grpc::Channel> NewTestChannel(const std::string& address);

}  // namespace kvfleet::testing
