// A model's calibration record (`kvfleet eval --calibrate`): how far each
// CPU mode's token distributions fall from a float64 reference over a
// pinned text, and the gate they were judged by. The worker reads it to
// choose its default mode (mode_choice.h).
//
// A JSON file, "<model file>.calibration.json" beside the model (or
// "kvfleet-calibration.json" inside a checkpoint directory):
//   {"format": "kvfleet-calibration-v1",
//    "model_fingerprint": hex,           the weights it was measured on
//    "adapter": "name@digest",           only when measured under a LoRA
//                                        adapter (workers never choose by it)
//    "backend": "cpu",
//    "text": {"name", "sha256", "positions", "context"},
//    "reference": "how the float64 distributions were made",
//    "gate": {"activations_mean_kl", "kv_mean_kl", "source"},
//    "modes": [{"cpu_activations", "kv_cache_dtype", "numerics",
//               "perplexity", "mean_kl", "median_kl", "p99_kl", "max_kl",
//               "same_top1", "tokens_per_second", "passes"}, ...],
//    "key_channel_scales": {"rule", "layers", "kv_heads", "head_dim",
//               "exponents": ["0310...", ...]},  one string per layer, a hex
//               digit per (KV head, channel): int8_rotated_scaled's scales
//    "command": "the command that made it"}
//
//   ASSIGN_OR_RETURN(CalibrationRecord r, ReadCalibrationRecord(CalibrationPathFor(model_path)));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/executor_options.h"

namespace kvfleet::engine {

inline constexpr char kCalibrationFormat[] = "kvfleet-calibration-v1";

// The bar a mode must clear: llama.cpp's own mean KL divergence against the
// same float64 reference on the same model and text, for its default CPU
// path (8-bit activations) and for its q8_0 KV cache.
struct CalibrationGate {
  double activations_mean_kl = 0;  // bar for modes with a float16 KV cache
  double kv_mean_kl = 0;           // bar for modes with an 8-bit KV cache
  std::string source;              // what measured the bar, for a reader
};

// One mode's figures against the reference.
struct ModeFigures {
  CpuActivations cpu_activations = CpuActivations::kF32;
  kernels::KvCacheDtype kv_cache_dtype = kernels::KvCacheDtype::kF16;
  std::string numerics;  // the executor's numerics identity when measured
  double perplexity = 0;
  double mean_kl = 0;
  double median_kl = 0;
  double p99_kl = 0;
  double max_kl = 0;
  double same_top1 = 0;  // share of positions, in [0, 1]
  double tokens_per_second = 0;
  bool passes = false;  // PassesGate when written
};

struct CalibrationText {
  std::string name;
  std::string sha256;     // of the token ids (int32, little-endian), not the file
  int64_t positions = 0;  // scored positions
  int64_t context = 0;    // the evaluation's window
};

struct CalibrationRecord {
  std::string model_fingerprint;
  // The LoRA adapter every mode ran under ("name@digest"), its float64
  // reference merging the adapter into the weights; empty: the base
  // model. A worker's modes follow its base model's record only: an
  // adapter's record says whether the mode that record picks also holds
  // under the adapter.
  std::string adapter;
  std::string backend = "cpu";
  CalibrationText text;
  std::string reference;
  CalibrationGate gate;
  std::vector<ModeFigures> modes;
  // What int8_rotated_scaled modes were measured with; required when the
  // record has such a mode.
  std::optional<KeyChannelScales> key_channel_scales;
  std::string key_scale_rule;  // how they were derived, for a reader
  std::string command;
};

// The gate: the exact mode (f32 activations, f16 KV) always passes; another
// passes when its mean KL is at most the gate's bar for its KV format.
bool PassesGate(const ModeFigures& mode, const CalibrationGate& gate);

// Where a model's record sits by default: "<path>.calibration.json" for a
// file, "<path>/kvfleet-calibration.json" for a checkpoint directory.
std::string CalibrationPathFor(const std::string& model_path);

// NOT_FOUND when the file does not exist; INVALID_ARGUMENT naming the file
// and the field when it is not a record of this format: a figure that is
// not a finite non-negative number (a share above 1), a mode not spelled
// as its flag value, a fingerprint that is not 64 hex digits, or a verdict
// that the gate and the figures do not give.
absl::StatusOr<CalibrationRecord> ReadCalibrationRecord(const std::string& path);
absl::Status WriteCalibrationRecord(const std::string& path, const CalibrationRecord& record);

}  // namespace kvfleet::engine
