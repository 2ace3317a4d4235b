// Which CPU mode a worker runs when its flags say "auto": the fastest mode
// that its model's calibration record (calibration_record.h) says passes
// the gate, or the exact mode (float32 activations, float16 KV) when there
// is no usable record. A mode given by a flag is kept; the other axis is
// chosen among the passing modes that share it.
//
// The gate: a mode passes when its mean KL divergence against float64 is
// no larger than llama.cpp's on the same model and text: its default path's
// for modes with a float16 KV cache, its q8_0 KV cache's for 8-bit KV.
//
// "Fastest" is an order fixed by design, not a timing in the record (timings
// are noisy; the order is not): 8-bit activations before float32 (1.4-2x
// the decode rate on the CPU), then an 8-bit KV format before float16
// (twice the tokens per GiB, so larger batches), then the lower mean KL.
//
//   ChosenMode m = ChooseMode({.activations = std::nullopt, .kv = std::nullopt}, record, ctx);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/calibration/calibration_record.h"
#include "engine/executor/executor_options.h"
#include "model/model.h"

namespace kvfleet::engine {

// A flag's value: a mode, or nullopt for "auto".
struct ModeSetting {
  std::optional<CpuActivations> activations;
  std::optional<kernels::KvCacheDtype> kv;
};

// "auto" or a mode (ParseCpuActivations, ParseKvCacheDtype).
absl::StatusOr<std::optional<CpuActivations>> ParseCpuActivationsSetting(std::string_view text);
absl::StatusOr<std::optional<kernels::KvCacheDtype>> ParseKvCacheDtypeSetting(std::string_view text);

// What a record must match to be used: the model's weights and this
// build's numerics identity for a mode (empty when the backend has none
// for it, e.g. 8-bit activations on a GPU).
struct CalibrationMatch {
  std::string model_fingerprint;
  std::string backend;  // "cpu" or "cuda"
  std::function<std::string(CpuActivations, kernels::KvCacheDtype)> numerics_of;
};

struct ChosenMode {
  CpuActivations activations = CpuActivations::kF32;
  kernels::KvCacheDtype kv = kernels::KvCacheDtype::kF16;
  // One line for the log: what chose it and why ("... from RECORD: mean
  // KL ...", "int8 KV by flag; exact otherwise: no calibration record at ...").
  std::string reason;
  bool from_record = false;
  // "calibration" (the record chose at least one axis), "flags" (a flag
  // chose one or both, the rest exact) or "exact": for GetInfo and metrics.
  std::string source = "exact";
  // The record's, when kv is int8_rotated_scaled (ResolveMode sets it).
  std::shared_ptr<const KeyChannelScales> key_channel_scales;
};

// `record` is the read's result (NOT_FOUND: no record). A record that
// names other weights, another backend or other numerics is not used, and
// `reason` says which. Never fails: the exact mode is always allowed.
ChosenMode ChooseMode(const ModeSetting& setting, const absl::StatusOr<CalibrationRecord>& record,
                      const std::string& record_path, const CalibrationMatch& match);

// Reads the record and chooses: what a worker and `kvfleet capacity` share.
// An int8_rotated_scaled KV cache, by flag or by the record, takes its key
// channel scales from the record; without a usable one it is an error that
// says how to make one.
struct ModeRequest {
  ModeSetting setting;
  std::string record_path;
  // Named by a flag: a missing file, or one that is not a record, is an
  // error naming it. Otherwise (the default path beside the model) it only
  // leaves the exact mode, with the reason said.
  bool record_required = false;
  std::string backend;  // "cpu" or "cuda"
  // The model's fingerprint, asked for only when a record of this backend
  // is there (it hashes every weight unless cached).
  std::function<std::string()> fingerprint;
  std::function<std::string(CpuActivations, kernels::KvCacheDtype)> numerics_of;
};
absl::StatusOr<ChosenMode> ResolveMode(const ModeRequest& request);

// For the in-process tools (eval, bench-model, generate, engine_bench):
// int8_rotated_scaled's key channel scales from the record at record_path,
// for these modes of `model`; null for the other KV formats.
absl::StatusOr<std::shared_ptr<const KeyChannelScales>> KeyScalesForModes(const model::Model& model,
                                                                          const std::string& record_path,
                                                                          bool record_required, DeviceKind device,
                                                                          CpuActivations activations,
                                                                          kernels::KvCacheDtype kv);

}  // namespace kvfleet::engine
