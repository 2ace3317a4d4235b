#include "services/worker/server/worker_mode.h"

#include "absl/strings/str_cat.h"
#include "engine/calibration/calibration_record.h"
#include "engine/executor/executor_factory.h"
#include "model/model_fingerprint.h"

namespace kvfleet::worker {

absl::StatusOr<engine::ChosenMode> ResolveWorkerMode(const WorkerOptions& o, const model::Model& model,
                                                     engine::DeviceKind device) {
  engine::ModeSetting setting = o.mode;
  // 8-bit activations are the CPU backend's; a GPU always runs float.
  if (device != engine::DeviceKind::kCpu && !setting.activations) setting.activations = engine::CpuActivations::kF32;
  const std::string path = o.calibration_path.empty() ? engine::CalibrationPathFor(o.model_path) : o.calibration_path;
  if (setting.activations && setting.kv) return engine::ChooseMode(setting, absl::NotFoundError(""), path, {});
  const absl::StatusOr<engine::CalibrationRecord> record = engine::ReadCalibrationRecord(path);
  if (!o.calibration_path.empty() && !record.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--calibration ", path, ": ", record.status().message(),
                                                   absl::IsNotFound(record.status()) ? " (no such file)" : ""));
  }
  engine::CalibrationMatch match{.backend = device == engine::DeviceKind::kCpu ? "cpu" : "cuda",
                                 .numerics_of = engine::CpuNumerics};
  if (record.ok()) match.model_fingerprint = model::CachedModelFingerprint(model, o.cache_dir);
  return engine::ChooseMode(setting, record, path, match);
}

const char* ModeSource(const engine::ChosenMode& mode, const engine::ModeSetting& setting) {
  if (mode.from_record) return "calibration";
  if (setting.activations && setting.kv) return "flags";
  return "exact";
}

}  // namespace kvfleet::worker
