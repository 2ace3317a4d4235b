// The start-up protocol every kvfleet service follows on stdout, read from a
// ChildProcess: once bound it prints
//   <name> listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT][ http=HOST:PORT][ kvtransfer=HOST:PORT]
// and once it serves
//   <name> ready
// AwaitServiceReady waits for both and returns the two addresses. Stateless
// functions; thread-safety is ChildProcess's.
//
//   ASSIGN_OR_RETURN(auto child, ChildProcess::Start(binary, args, log_path));
//   ASSIGN_OR_RETURN(ServiceEndpoints at, AwaitServiceReady(*child, "kvfleet-worker", absl::Now() + absl::Minutes(2)));
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"

namespace kvfleet::cluster {

struct ServiceEndpoints {
  std::string grpc_address;     // "127.0.0.1:50051"
  std::string metrics_address;  // "127.0.0.1:9464"
  int metrics_port = 0;
  std::string health_address;  // empty unless started with --health-port
  std::string http_address;    // the router's OpenAI-compatible port; empty unless started with --http-listen
  std::string kv_transfer_address;  // a worker's KV transfer port; empty unless started with --kv-transfer-listen
};

// Parses "<name> listening grpc=H:P metrics=H:Q[ health=H:R][ http=H:S][ kvtransfer=H:T]"; fails on a
// malformed line.
absl::StatusOr<ServiceEndpoints> ParseListeningLine(const std::string& line);

// Waits for `name`'s listening line, then its ready line, both before
// `deadline`. Fails (quoting the stdout lines seen) when the child exits
// first, the deadline passes or the listening line is malformed. When given,
// `interrupted` is asked about every 100 ms (it must not block); true fails
// the wait with CANCELLED.
absl::StatusOr<ServiceEndpoints> AwaitServiceReady(ChildProcess& child, const std::string& name, absl::Time deadline,
                                                   const std::function<bool()>& interrupted = nullptr);

// The last `max_bytes` of the file at `path` (a service's log), or a note
// saying it cannot be read.
std::string LogTail(const std::string& path, size_t max_bytes = 4096);

}  // namespace kvfleet::cluster
