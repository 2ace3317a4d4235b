// Translation between the cachemanager's protobuf messages and the plain
// structs of its index (services/cachemanager/index/). Everything the wire
// can get wrong is refused here with a message naming the field: hashes
// that are not 16 bytes, an empty worker id, a block size of 0.
//
//   ASSIGN_OR_RETURN(KvEventBatch b, ToKvEventBatch(proto));
#pragma once

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "kvfleet/v1/cachemanager.pb.h"
#include "services/cachemanager/index/kv_map.h"
#include "services/transport/wire/load_report_convert.h"

namespace kvfleet::cachemanager {

absl::StatusOr<std::vector<BlockHash>> ParseHashes(const google::protobuf::RepeatedPtrField<std::string>& hashes,
                                                  const std::string& field);
absl::StatusOr<WorkerDescriptor> ToDescriptor(const v1::RegisterRequest& request);
absl::StatusOr<KvEventBatch> ToKvEventBatch(const v1::EventBatch& batch);

// The load report's pair is shared (services/transport/wire/load_report_convert.h).
using transport::FromProto;
using transport::ToProto;
v1::WorkerEntry ToProto(const WorkerView& worker, Clock::time_point now);
v1::WorkerChange ToProto(const MembershipChange& change, Clock::time_point now);

}  // namespace kvfleet::cachemanager
