#include "tests/testing/service_process.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tools/cluster/service_process.h"

namespace kvfleet::testing {

std::string ServiceBinary(const std::string& name, const std::string& built_path) {
  const char* dir = std::getenv("KVFLEET_BIN_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) + "/" + name : built_path;
}

absl::StatusOr<StartedService> StartServiceProcess(const std::string& name, const std::string& binary,
                                                   const std::vector<std::string>& args, const std::string& stderr_path,
                                                   absl::Duration ready_timeout) {
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Start(binary, args, stderr_path));
  const absl::StatusOr<cluster::ServiceEndpoints> endpoints =
      cluster::AwaitServiceReady(*child, name, absl::Now() + ready_timeout);
  if (!endpoints.ok()) {
    const std::string tail = stderr_path.empty() ? ""
                                                 : absl::StrCat("\nstderr (", stderr_path, ", last bytes):\n",
                                                                cluster::LogTail(stderr_path));
    return absl::Status(endpoints.status().code(),
                        absl::StrCat(name, " did not start: ", endpoints.status().message(), tail));
  }
  return StartedService{.process = std::move(child),
                        .address = endpoints->grpc_address,
                        .metrics_port = endpoints->metrics_port,
                        .health_address = endpoints->health_address,
                        .kv_transfer_address = endpoints->kv_transfer_address};
}

absl::StatusOr<bool> HealthServing(const std::string& address, const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(NewTestChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = health->Check(&context, request, &response);
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), "health Check: " + s.error_message());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

std::shared_ptr<grpc::Channel> NewTestChannel(const std::string& address) {
  return transport::CreateClientChannel(address, {.own_connection = true});
}

}  // namespace kvfleet::testing
