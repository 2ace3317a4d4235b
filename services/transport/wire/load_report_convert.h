// The load snapshot's one conversion pair between its plain form
// (common/worker_load.h) and its wire form (the proto LoadReport), used by
// the worker, the cachemanager and the router alike.
#pragma once

#include "common/worker_load.h"
#include "kvfleet/v1/types.pb.h"

namespace kvfleet::transport {

v1::LoadReport ToProto(const WorkerLoad& load);
// Cuts the admitted tickets at WorkerLoad::kMaxAdmittedRouters.
WorkerLoad FromProto(const v1::LoadReport& report);

}  // namespace kvfleet::transport
