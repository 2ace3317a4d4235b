// Translation between the worker's protobuf messages and the engine's plain
// structs. Checks what only the wire format can get wrong (field sizes,
// unset means default); the engine's own Validate checks the values, so
// the CLI and the worker reject the same requests with the same messages.
//
//   ASSIGN_OR_RETURN(engine::EngineRequest r, ToEngineRequest(proto, RequestId(7), context_length));
//   AppendOutput(output, &response);
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/ids.h"
#include "common/worker_load.h"
#include "engine/engine_stats.h"
#include "engine/request/request.h"
#include "kvfleet/v1/cachemanager.pb.h"
#include "kvfleet/v1/worker.pb.h"
#include "services/limits/request_limits.h"

namespace kvfleet::worker {

// max_tokens 0 (unset) becomes "the rest of the context". The request is
// checked against `limits` first, as the router did: a worker may be called
// directly.
absl::StatusOr<engine::EngineRequest> ToEngineRequest(const v1::GenerateRequest& request, RequestId id,
                                                      int64_t context_length,
                                                      const limits::RequestLimits& limits = {});

v1::FinishReason ToProto(engine::FinishReason reason);

// Appends an engine output's tokens (and logprobs) to `response` and sets
// its usage so far; on the final output also the finish reason. Appending lets the
// server merge outputs that queued behind a slow client into one message.
void AppendOutput(const engine::RequestOutput& output, v1::GenerateResponse* response);

// The worker's load snapshot, for the cachemanager's reports and GetStats
// alike. `admitted` read before `stats`: a ticket in the snapshot then
// implies its request is in the figures (AdmittedTickets::Record follows
// Submit).
WorkerLoad LoadOf(const engine::EngineStats& stats, bool draining, const std::vector<v1::PlacementTicket>& admitted);

// GetStats: the load snapshot (load_report) and its view for people.
v1::WorkerStats ToProto(const engine::EngineStats& stats, int32_t max_num_seqs, const WorkerLoad& load);

}  // namespace kvfleet::worker
