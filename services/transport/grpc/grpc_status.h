// absl::Status → grpc::Status, the only place a library's status becomes a
// wire status (only the gRPC layer does this: docs/design.md, "Errors and
// status codes"). Codes map one to one; the message is kept, since library
// messages are written for people.
//
//   return ToGrpcStatus(engine.Submit(...));
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"

namespace kvfleet::transport {

grpc::Status ToGrpcStatus(const absl::Status& status);
// And back, for a client reading a peer's answer.
absl::Status FromGrpcStatus(const grpc::Status& status);

// "invalid_argument", "resource_exhausted", ...: a metric label.
std::string StatusCodeLabel(absl::StatusCode code);

}  // namespace kvfleet::transport
