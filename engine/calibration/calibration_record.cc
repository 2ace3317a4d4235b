#include "engine/calibration/calibration_record.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "model/hf/json_config_reader.h"
#include "nlohmann/json.hpp"

namespace kvfleet::engine {
namespace {

using nlohmann::json;

json ModeToJson(const ModeFigures& m) {
  return json{{"cpu_activations", std::string(CpuActivationsName(m.cpu_activations))},
              {"kv_cache_dtype", std::string(kernels::KvCacheDtypeName(m.kv_cache_dtype))},
              {"numerics", m.numerics},
              {"perplexity", m.perplexity},
              {"mean_kl", m.mean_kl},
              {"median_kl", m.median_kl},
              {"p99_kl", m.p99_kl},
              {"max_kl", m.max_kl},
              {"same_top1", m.same_top1},
              {"tokens_per_second", m.tokens_per_second},
              {"passes", m.passes}};
}

// Every figure a non-negative finite number; the modes by their flag names.
absl::StatusOr<ModeFigures> ModeFromJson(const model::JsonConfigReader& r, const std::string& at) {
  ModeFigures m;
  auto field = [&](const char* name) { return absl::StrCat(at, ".", name); };
  auto named = [&](const char* name, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(r.origin(), ": ", field(name), ": ", s.message()));
  };
  ASSIGN_OR_RETURN(std::string activations, r.String(field("cpu_activations")));
  absl::StatusOr<CpuActivations> a = ParseCpuActivations(activations);
  if (!a.ok()) return named("cpu_activations", a.status());
  m.cpu_activations = *a;
  ASSIGN_OR_RETURN(std::string kv, r.String(field("kv_cache_dtype")));
  absl::StatusOr<kernels::KvCacheDtype> dtype = ParseKvCacheDtype(kv);
  if (!dtype.ok()) return named("kv_cache_dtype", dtype.status());
  if (kernels::KvCacheDtypeName(*dtype) != kv) {  // one spelling per mode, as the writer writes it
    return named("kv_cache_dtype",
                 absl::InvalidArgumentError(
                     absl::StrCat("write '", std::string(kernels::KvCacheDtypeName(*dtype)), "', not '", kv, "'")));
  }
  m.kv_cache_dtype = *dtype;
  ASSIGN_OR_RETURN(m.numerics, r.String(field("numerics")));
  for (auto [name, out] : {std::pair{"perplexity", &m.perplexity},
                           {"mean_kl", &m.mean_kl},
                           {"median_kl", &m.median_kl},
                           {"p99_kl", &m.p99_kl},
                           {"max_kl", &m.max_kl},
                           {"same_top1", &m.same_top1},
                           {"tokens_per_second", &m.tokens_per_second}}) {
    ASSIGN_OR_RETURN(*out, r.Float(field(name)));
    if (!(*out >= 0) || !std::isfinite(*out)) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.origin(), ": ", field(name), " must be a finite non-negative number, got ", *out));
    }
  }
  if (m.same_top1 > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.origin(), ": ", field("same_top1"), " is a share in [0, 1], got ", m.same_top1));
  }
  ASSIGN_OR_RETURN(m.passes, r.Bool(field("passes")));
  return m;
}

json ScalesToJson(const KeyChannelScales& k, const std::string& rule) {
  json layers = json::array();
  const int64_t per_layer = k.num_kv_heads * k.head_dim;
  for (int64_t l = 0; l < k.num_layers; ++l) {
    std::string digits;
    for (int64_t i = 0; i < per_layer; ++i) digits += "0123456789abcdef"[k.exponents[l * per_layer + i]];
    layers.push_back(digits);
  }
  return json{{"rule", rule},
              {"layers", k.num_layers},
              {"kv_heads", k.num_kv_heads},
              {"head_dim", k.head_dim},
              {"exponents", std::move(layers)}};
}

absl::Status ScalesFromJson(const model::JsonConfigReader& r, CalibrationRecord& rec) {
  const std::string& path = r.origin();
  KeyChannelScales k;
  ASSIGN_OR_RETURN(rec.key_scale_rule, r.String("key_channel_scales.rule"));
  ASSIGN_OR_RETURN(k.num_layers, r.Int("key_channel_scales.layers"));
  ASSIGN_OR_RETURN(k.num_kv_heads, r.Int("key_channel_scales.kv_heads"));
  ASSIGN_OR_RETURN(k.head_dim, r.Int("key_channel_scales.head_dim"));
  const json& scales = r.json().at("key_channel_scales");
  const json layers = scales.contains("exponents") ? scales.at("exponents") : json();
  if (k.num_layers < 1 || k.num_kv_heads < 1 || k.head_dim < 1 || !layers.is_array() ||
      static_cast<int64_t>(layers.size()) != k.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": key_channel_scales.exponents must be one string per layer (", k.num_layers, " layers)"));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string digits = layers[l].is_string() ? layers[l].get<std::string>() : std::string();
    if (static_cast<int64_t>(digits.size()) != k.num_kv_heads * k.head_dim ||
        digits.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": key_channel_scales.exponents[", l, "] must be ",
                                                     k.num_kv_heads * k.head_dim,
                                                     " lowercase hex digits (one per KV head and channel)"));
    }
    for (char c : digits) k.exponents.push_back(static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10));
  }
  rec.key_channel_scales = std::move(k);
  return absl::OkStatus();
}

absl::StatusOr<CalibrationRecord> ParseRecord(const model::JsonConfigReader& r) {
  const std::string& path = r.origin();
  ASSIGN_OR_RETURN(std::string format, r.String("format"));
  if (format != kCalibrationFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": format is '", format, "', expected '", kCalibrationFormat,
                                                   "' (remake it with kvfleet eval --calibrate)"));
  }
  CalibrationRecord rec;
  ASSIGN_OR_RETURN(rec.model_fingerprint, r.String("model_fingerprint"));
  ASSIGN_OR_RETURN(rec.backend, r.String("backend"));
  if (r.Has("adapter")) {
    ASSIGN_OR_RETURN(rec.adapter, r.String("adapter"));
  }
  ASSIGN_OR_RETURN(rec.text.name, r.String("text.name"));
  ASSIGN_OR_RETURN(rec.text.sha256, r.String("text.sha256"));
  ASSIGN_OR_RETURN(rec.text.positions, r.Int("text.positions"));
  ASSIGN_OR_RETURN(rec.text.context, r.Int("text.context"));
  ASSIGN_OR_RETURN(rec.reference, r.String("reference"));
  ASSIGN_OR_RETURN(rec.gate.activations_mean_kl, r.Float("gate.activations_mean_kl"));
  ASSIGN_OR_RETURN(rec.gate.kv_mean_kl, r.Float("gate.kv_mean_kl"));
  ASSIGN_OR_RETURN(rec.gate.source, r.String("gate.source"));
  for (double bar : {rec.gate.activations_mean_kl, rec.gate.kv_mean_kl}) {
    if (!(bar >= 0) || !std::isfinite(bar)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the gate's mean KL divergences must be finite non-negative numbers, got ", bar));
    }
  }
  if (rec.model_fingerprint.size() != 64 ||
      rec.model_fingerprint.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ": model_fingerprint must be 64 lowercase hex digits (the "
                                                   "model's SHA-256 fingerprint), got '",
                                                   rec.model_fingerprint, "'"));
  }
  const nlohmann::json* modes = r.json().contains("modes") ? &r.json()["modes"] : nullptr;
  if (modes == nullptr || !modes->is_array() || modes->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": 'modes' must be a non-empty list"));
  }
  for (size_t i = 0; i < modes->size(); ++i) {
    // Each entry through the same typed reader, named as a reader finds it.
    const std::string at = absl::StrCat("modes[", i, "]");
    const model::JsonConfigReader entry(path, json{{at, (*modes)[i]}});
    ASSIGN_OR_RETURN(ModeFigures m, ModeFromJson(entry, at));
    if (m.passes != PassesGate(m, rec.gate)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", at, ".passes is ", m.passes ? "true" : "false",
                                                     ", but its mean KL ", m.mean_kl, " and the gate give the other"));
    }
    rec.modes.push_back(std::move(m));
  }
  if (r.Has("key_channel_scales")) RETURN_IF_ERROR(ScalesFromJson(r, rec));
  for (const ModeFigures& m : rec.modes) {
    if (kernels::KvScalesKeyChannels(m.kv_cache_dtype) && !rec.key_channel_scales) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": it lists an int8_rotated_scaled mode but no key_channel_scales (remake it with kvfleet eval "
                       "--calibrate)"));
    }
  }
  if (r.Has("command")) {
    ASSIGN_OR_RETURN(rec.command, r.String("command"));
  }
  return rec;
}

}  // namespace

bool PassesGate(const ModeFigures& mode, const CalibrationGate& gate) {
  const bool exact = mode.cpu_activations == CpuActivations::kF32 && mode.kv_cache_dtype == kernels::KvCacheDtype::kF16;
  if (exact) return true;
  return mode.mean_kl <=
         (mode.kv_cache_dtype == kernels::KvCacheDtype::kF16 ? gate.activations_mean_kl : gate.kv_mean_kl);
}

std::string CalibrationPathFor(const std::string& model_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec)) {
    return (std::filesystem::path(model_path) / "kvfleet-calibration.json").string();
  }
  return model_path + ".calibration.json";
}

absl::StatusOr<CalibrationRecord> ReadCalibrationRecord(const std::string& path) {
  ASSIGN_OR_RETURN(nlohmann::json doc, model::ReadJsonFile(path));
  absl::StatusOr<CalibrationRecord> rec = ParseRecord(model::JsonConfigReader(path, std::move(doc)));
  // A field the file lacks is a bad record, not a missing one.
  if (absl::IsNotFound(rec.status())) return absl::InvalidArgumentError(rec.status().message());
  return rec;
}

absl::Status WriteCalibrationRecord(const std::string& path, const CalibrationRecord& rec) {
  json modes = json::array();
  for (const ModeFigures& m : rec.modes) modes.push_back(ModeToJson(m));
  json doc{{"format", kCalibrationFormat},
           {"model_fingerprint", rec.model_fingerprint},
           {"backend", rec.backend},
           {"text",
            {{"name", rec.text.name},
             {"sha256", rec.text.sha256},
             {"positions", rec.text.positions},
             {"context", rec.text.context}}},
           {"reference", rec.reference},
           {"gate",
            {{"activations_mean_kl", rec.gate.activations_mean_kl},
             {"kv_mean_kl", rec.gate.kv_mean_kl},
             {"source", rec.gate.source}}},
           {"modes", std::move(modes)},
           {"command", rec.command}};
  if (!rec.adapter.empty()) doc["adapter"] = rec.adapter;
  if (rec.key_channel_scales) doc["key_channel_scales"] = ScalesToJson(*rec.key_channel_scales, rec.key_scale_rule);
  return WriteFile(path, doc.dump(2) + "\n");
}

}  // namespace kvfleet::engine
