#include "services/transport/grpc/grpc_status.h"

#include "absl/strings/ascii.h"

namespace kvfleet::transport {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string StatusCodeLabel(absl::StatusCode code) { return absl::AsciiStrToLower(absl::StatusCodeToString(code)); }

}  // namespace kvfleet::transport
