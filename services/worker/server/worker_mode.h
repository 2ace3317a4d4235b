// The worker's numerics mode: the flags where given, otherwise ("auto", the
// default) the fastest mode that the model's calibration record says passes
// the accuracy gate (engine/calibration/), otherwise the exact one.
//
//   ASSIGN_OR_RETURN(engine::ChosenMode mode, ResolveWorkerMode(options, *model, device.kind));
//   KVFLEET_LOG_INFO("numerics mode: {}", mode.reason);
#pragma once

#include "engine/calibration/mode_choice.h"
#include "model/model.h"
#include "services/worker/server/worker_options.h"

namespace kvfleet::worker {

// Reads the record (--calibration, or beside the model) only when a flag
// is "auto", and the model's fingerprint (cached in --cache-dir) only when
// a record exists. A record beside the model that cannot be used leaves the
// exact mode (the reason says why); one named by --calibration that is
// missing or not a record is an error naming it, since it was asked for.
absl::StatusOr<engine::ChosenMode> ResolveWorkerMode(const WorkerOptions& options, const model::Model& model,
                                                     engine::DeviceKind device);

}  // namespace kvfleet::worker
