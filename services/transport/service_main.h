// The main() every kvfleet service shares: block termination signals
// before any thread starts (TerminationSignals), answer --help, parse the
// flags (exit 2 naming the problem), start logging at the chosen level, run
// (exit 1 with the status on failure, 0 after a clean stop).
//
//   int main(int argc, char** argv) {
//     return kvfleet::transport::ServiceMain(argc, argv, "kvfleet-worker", kUsage, ParseWorkerOptions, Run);
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/logging.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/transport/termination_signals.h"
#include "services/transport/transport_options.h"

namespace kvfleet::transport {

// The server the shared flags describe (address, health port, TLS, allowed
// peers, reflection), serving `services` with `readiness_name` as its
// readiness name besides "".
inline GrpcServerOptions ServerOptionsFrom(const TransportOptions& t, std::vector<grpc::Service*> services,
                                           std::string readiness_name) {
  return {.address = t.listen,
          .services = std::move(services),
          .max_receive_message_bytes = t.max_message_bytes,
          .max_metadata_bytes = t.max_metadata_bytes,
          .max_concurrent_streams = t.max_concurrent_streams,
          .internal_token = t.internal_token,
          .health_service_names = {std::move(readiness_name)},
          .health_port = t.health_port,
          .health_host = t.metrics_host,
          .tls = t.tls,
          .allowed_peers = t.tls_allowed_peers,
          .reflection = t.reflection};
}

// The line scripts and tests wait for once a service has bound its ports:
//   <name> listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT][ http=HOST:PORT][ kvtransfer=HOST:PORT]
inline void PrintListening(const char* name, const RunningServer& server, const std::string& metrics_host,
                           int metrics_port, const std::string& http_address = "",
                           const std::string& kv_transfer_address = "") {
  std::string line = absl::StrCat(name, " listening grpc=", server.address, " metrics=", metrics_host, ":", metrics_port);
  if (!server.health_address.empty()) absl::StrAppend(&line, " health=", server.health_address);
  if (!http_address.empty()) absl::StrAppend(&line, " http=", http_address);
  if (!kv_transfer_address.empty()) absl::StrAppend(&line, " kvtransfer=", kv_transfer_address);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Options must have `transport` (TransportOptions).
template <typename Options>
int ServiceMain(int argc, char** argv, const char* name, const std::string& usage,
                absl::StatusOr<Options> (*parse)(const std::vector<std::string>&), absl::Status (*run)(const Options&)) {
  TerminationSignals::Block();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (flags::WantsHelp(args)) {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  const absl::StatusOr<Options> options = parse(args);
  if (!options.ok()) {
    const std::string message(options.status().message());
    const bool hinted = message.find("--help") != std::string::npos;
    std::fprintf(stderr, "%s: %s%s\n", name, message.c_str(), hinted ? "" : " (see --help)");
    return 2;
  }
  InitLogging(options->transport.log_level);
  const absl::Status status = run(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kvfleet::transport
