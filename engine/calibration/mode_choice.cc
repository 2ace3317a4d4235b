#include "engine/calibration/mode_choice.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cache_dir.h"
#include "common/status_macros.h"
#include "engine/executor/executor_factory.h"
#include "model/model_fingerprint.h"

namespace kvfleet::engine {
namespace {

std::string ModeName(CpuActivations a, kernels::KvCacheDtype kv) {
  return absl::StrCat(std::string(CpuActivationsName(a)), " activations, ", std::string(kernels::KvCacheDtypeName(kv)),
                      " KV");
}

// Appended to a mode parser's refusal: the one list of values stays there.
constexpr char kAutoNote[] = ", or auto (the calibration record's choice)";

// Smaller is faster (the header's order).
std::tuple<int, int, double> SpeedRank(const ModeFigures& m) {
  return {m.cpu_activations == CpuActivations::kQ8 ? 0 : 1, m.kv_cache_dtype == kernels::KvCacheDtype::kF16 ? 1 : 0,
          m.mean_kl};
}

// The flags' axes, the exact mode's on the others.
ChosenMode Exact(const ModeSetting& s, const std::string& why) {
  ChosenMode m{.activations = s.activations.value_or(CpuActivations::kF32),
               .kv = s.kv.value_or(kernels::KvCacheDtype::kF16)};
  std::vector<std::string> flagged;
  if (s.activations) flagged.push_back(absl::StrCat(std::string(CpuActivationsName(*s.activations)), " activations"));
  if (s.kv) flagged.push_back(absl::StrCat(std::string(kernels::KvCacheDtypeName(*s.kv)), " KV"));
  if (flagged.empty()) {
    m.reason = absl::StrCat("exact: ", why);
  } else if (flagged.size() == 2) {
    m.reason = absl::StrCat(ModeName(m.activations, m.kv), " by flags");
  } else {
    m.reason = absl::StrCat(flagged[0], " by flag; exact otherwise: ", why);
  }
  m.source = flagged.empty() ? "exact" : "flags";
  return m;
}

}  // namespace

absl::StatusOr<std::optional<CpuActivations>> ParseCpuActivationsSetting(std::string_view text) {
  if (text == "auto") return std::optional<CpuActivations>();
  auto a = ParseCpuActivations(text);
  if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat(a.status().message(), kAutoNote));
  return std::optional<CpuActivations>(*a);
}

absl::StatusOr<std::optional<kernels::KvCacheDtype>> ParseKvCacheDtypeSetting(std::string_view text) {
  if (text == "auto") return std::optional<kernels::KvCacheDtype>();
  auto kv = ParseKvCacheDtype(text);
  if (!kv.ok()) return absl::InvalidArgumentError(absl::StrCat(kv.status().message(), kAutoNote));
  return std::optional<kernels::KvCacheDtype>(*kv);
}

ChosenMode ChooseMode(const ModeSetting& setting, const absl::StatusOr<CalibrationRecord>& record,
                      const std::string& record_path, const CalibrationMatch& match) {
  if (setting.activations && setting.kv) return Exact(setting, "");
  if (!record.ok()) {
    if (absl::IsNotFound(record.status()))
      return Exact(setting, absl::StrCat("no calibration record at ", record_path));
    return Exact(setting, absl::StrCat("the calibration record is not usable: ", record.status().message()));
  }
  const CalibrationRecord& r = *record;
  if (r.backend != match.backend) {
    return Exact(setting, absl::StrCat(record_path, " was measured on the ", r.backend,
                                       " backend; this worker runs on ", match.backend));
  }
  if (!r.adapter.empty()) {
    return Exact(setting, absl::StrCat(record_path, " was measured under the LoRA adapter ", r.adapter,
                                       "; a worker's modes follow its base model's record"));
  }
  if (r.model_fingerprint != match.model_fingerprint) {
    return Exact(setting, absl::StrCat(record_path, " was measured on other weights (fingerprint ",
                                       r.model_fingerprint.substr(0, 12), ", this model's ",
                                       match.model_fingerprint.substr(0, 12), ")"));
  }
  const ModeFigures* best = nullptr;
  int stale = 0;
  for (const ModeFigures& m : r.modes) {
    if (setting.activations && m.cpu_activations != *setting.activations) continue;
    if (setting.kv && m.kv_cache_dtype != *setting.kv) continue;
    if (!PassesGate(m, r.gate)) continue;
    if (m.numerics != match.numerics_of(m.cpu_activations, m.kv_cache_dtype)) {
      ++stale;  // measured with kernels this build no longer has
      continue;
    }
    if (best == nullptr || SpeedRank(m) < SpeedRank(*best)) best = &m;
  }
  if (best == nullptr) {
    return Exact(setting, absl::StrCat(record_path, " has no passing mode for this build",
                                       stale > 0 ? absl::StrCat(" (", stale, " measured with other kernels)") : ""));
  }
  return {.activations = best->cpu_activations,
          .kv = best->kv_cache_dtype,
          .reason = absl::StrFormat(
              "%s from %s: mean KL %.3g against float64, gate %.3g (%s)",
              ModeName(best->cpu_activations, best->kv_cache_dtype), record_path, best->mean_kl,
              best->kv_cache_dtype == kernels::KvCacheDtype::kF16 ? r.gate.activations_mean_kl : r.gate.kv_mean_kl,
              r.gate.source),
          .from_record = true,
          .source = "calibration"};
}

absl::StatusOr<ChosenMode> ResolveMode(const ModeRequest& q) {
  const bool needs_scales = q.setting.kv && kernels::KvScalesKeyChannels(*q.setting.kv);
  if (q.setting.activations && q.setting.kv && !needs_scales) {
    return ChooseMode(q.setting, absl::NotFoundError(""), q.record_path, {});
  }
  const absl::StatusOr<CalibrationRecord> record = ReadCalibrationRecord(q.record_path);
  if (q.record_required && !record.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--calibration ", q.record_path, ": ", record.status().message(),
                                                   absl::IsNotFound(record.status()) ? " (no such file)" : ""));
  }
  CalibrationMatch match{.backend = q.backend, .numerics_of = q.numerics_of};
  if (record.ok() && record->backend == q.backend && q.fingerprint) match.model_fingerprint = q.fingerprint();
  ChosenMode chosen = ChooseMode(q.setting, record, q.record_path, match);
  if (!kernels::KvScalesKeyChannels(chosen.kv)) return chosen;
  // Only a record of these weights and this backend can give the scales.
  std::string why;
  if (!record.ok()) {
    why = absl::IsNotFound(record.status()) ? "there is none" : std::string(record.status().message());
  } else if (record->backend != q.backend) {
    why = absl::StrCat("it was measured on the ", record->backend, " backend");
  } else if (!record->adapter.empty()) {
    why = absl::StrCat("it was measured under the LoRA adapter ", record->adapter);
  } else if (record->model_fingerprint != match.model_fingerprint) {
    why = "it was measured on other weights";
  } else if (!record->key_channel_scales) {
    why = "it has no key_channel_scales";
  } else {
    chosen.key_channel_scales = std::make_shared<const KeyChannelScales>(*record->key_channel_scales);
    return chosen;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the int8_rotated_scaled KV cache takes its key channel scales from the model's calibration record, and ",
      q.record_path, " cannot give them: ", why,
      " (make one with kvfleet eval --calibrate, or choose another --kv-cache-dtype)"));
}

absl::StatusOr<std::shared_ptr<const KeyChannelScales>> KeyScalesForModes(const model::Model& model,
                                                                          const std::string& record_path,
                                                                          bool record_required, DeviceKind device,
                                                                          CpuActivations activations,
                                                                          kernels::KvCacheDtype kv) {
  if (!kernels::KvScalesKeyChannels(kv)) return nullptr;
  ASSIGN_OR_RETURN(ChosenMode mode,
                   ResolveMode({.setting = {.activations = activations, .kv = kv},
                                .record_path = record_path,
                                .record_required = record_required,
                                .backend = device == DeviceKind::kCpu ? "cpu" : "cuda",
                                .fingerprint = [&] { return model::CachedModelFingerprint(model, DefaultCacheDir()); },
                                .numerics_of = CpuNumerics}));
  return mode.key_channel_scales;
}

}  // namespace kvfleet::engine
