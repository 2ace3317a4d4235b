#include "services/worker/server/worker_mode.h"

#include "engine/calibration/calibration_record.h"
#include "engine/executor/executor_factory.h"
#include "model/model_fingerprint.h"

namespace kvfleet::worker {

absl::StatusOr<engine::ChosenMode> ResolveWorkerMode(const WorkerOptions& o, const model::Model& model,
                                                     engine::DeviceKind device) {
  return engine::ResolveMode(
      {.setting = o.mode,
       .record_path = o.calibration_path.empty() ? engine::CalibrationPathFor(o.model_path) : o.calibration_path,
       .record_required = !o.calibration_path.empty(),
       .backend = device == engine::DeviceKind::kCpu ? "cpu" : "cuda",
       .fingerprint = [&] { return model::CachedModelFingerprint(model, o.cache_dir); },
       .numerics_of = engine::CpuNumerics});
}

}  // namespace kvfleet::worker
