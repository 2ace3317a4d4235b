#include "model/lora/peft_adapter_reader.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "model/hf/json_config_reader.h"
#include "model/hf/safetensors_file.h"

namespace kvfleet::model {
namespace {

constexpr char kConfigFile[] = "adapter_config.json";
constexpr char kWeightsFile[] = "adapter_model.safetensors";

std::string AllModules() {
  std::vector<std::string> names;
  for (int t = 0; t < kLoraTargets; ++t) names.emplace_back(LoraTargetModule(static_cast<LoraTarget>(t)));
  return absl::StrJoin(names, ", ");
}

std::optional<LoraTarget> TargetOf(std::string_view module) {
  for (int t = 0; t < kLoraTargets; ++t) {
    if (LoraTargetModule(static_cast<LoraTarget>(t)) == module) return static_cast<LoraTarget>(t);
  }
  return std::nullopt;
}

absl::Status Refuse(const std::string& dir, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("LoRA adapter ", dir, ": ", what));
}

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The config's settings kvfleet serves, after refusing the ones it cannot.
struct PeftConfig {
  int32_t rank = 0;
  double alpha = 8;  // PEFT's default
  bool rslora = false;
  std::set<LoraTarget> targets;
  std::string base_fingerprint;  // the config's kvfleet_base_fingerprint, if any
};

bool NonEmpty(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
         !((it->is_array() || it->is_object() || it->is_string()) && it->empty());
}

absl::StatusOr<PeftConfig> ReadConfig(const std::string& dir, const nlohmann::json& j, const LoraLimits& limits) {
  PeftConfig c;
  // A field of the wrong type is refused, never read as another (nlohmann would throw).
  for (const char* key : {"peft_type", "bias", "kvfleet_base_fingerprint"}) {
    if (j.contains(key) && !j[key].is_null() && !j[key].is_string()) {
      return Refuse(dir, absl::StrCat(key, " is not a string"));
    }
  }
  const std::string type =
      j.contains("peft_type") && j["peft_type"].is_string() ? j["peft_type"].get<std::string>() : "LORA";
  if (type != "LORA") return Refuse(dir, absl::StrCat("peft_type is ", type, "; kvfleet serves LORA adapters only"));
  if (NonEmpty(j, "use_dora")) {
    return Refuse(dir,
                  "use_dora is true: DoRA rescales each weight column by its norm, which kvfleet does not "
                  "compute; train a plain LoRA adapter");
  }
  if (NonEmpty(j, "modules_to_save")) {
    return Refuse(dir,
                  "modules_to_save is set: the adapter replaces whole modules (often the embeddings or the "
                  "head), which kvfleet does not serve per request; retrain without modules_to_save");
  }
  if (j.contains("bias") && j["bias"].is_string() && j["bias"].get<std::string>() != "none") {
    return Refuse(dir, absl::StrCat("bias is \"", j["bias"].get<std::string>(),
                                    "\": trained biases are not served; retrain with bias \"none\""));
  }
  for (const char* pattern : {"rank_pattern", "alpha_pattern"}) {
    if (NonEmpty(j, pattern)) {
      return Refuse(dir,
                    absl::StrCat(pattern, " is set: one rank and alpha per adapter are served, not one per module"));
    }
  }
  if (NonEmpty(j, "fan_in_fan_out")) {
    return Refuse(dir,
                  "fan_in_fan_out is true: that layout is for GPT-2's Conv1D modules, which kvfleet's "
                  "architectures do not have");
  }
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() <= 0) {
    return Refuse(dir, "r (the rank) is missing or not a positive integer");
  }
  const int64_t rank = j["r"].get<int64_t>();
  if (rank > limits.max_rank) {
    return Refuse(dir, absl::StrCat("r is ", rank, ", over --max-lora-rank ", limits.max_rank,
                                    " (the memory plan reserves room for that rank): raise --max-lora-rank"));
  }
  c.rank = static_cast<int32_t>(rank);
  if (j.contains("lora_alpha")) {
    if (!j["lora_alpha"].is_number()) return Refuse(dir, "lora_alpha is not a number");
    c.alpha = j["lora_alpha"].get<double>();
  }
  if (j.contains("use_rslora") && j["use_rslora"].is_boolean()) c.rslora = j["use_rslora"].get<bool>();
  // target_modules: a list of module names, "all-linear", or a regex over full module names.
  const auto targets = j.find("target_modules");
  if (targets == j.end() || targets->is_null()) return Refuse(dir, "target_modules is missing");
  if (targets->is_array()) {
    for (const nlohmann::json& m : *targets) {
      const std::string module = m.is_string() ? m.get<std::string>() : m.dump();
      if (module == "embed_tokens" || module == "lm_head") {
        return Refuse(dir, absl::StrCat("target_modules names ", module,
                                        ": embedding and head adapters are not served; adapt the projections (",
                                        AllModules(), ")"));
      }
      std::optional<LoraTarget> t = TargetOf(module);
      if (!t.has_value()) {
        return Refuse(
            dir, absl::StrCat("target_modules names ", module,
                              ", which matches no projection of the base model; its projections are ", AllModules()));
      }
      c.targets.insert(*t);
    }
  } else if (targets->is_string()) {
    const std::string pattern = targets->get<std::string>();
    // A bound on what the regex engine (recursive) is given from an untrusted file.
    if (pattern.size() > 256) return Refuse(dir, "target_modules is a pattern of over 256 characters");
    for (int t = 0; t < kLoraTargets; ++t) {
      const std::string module(LoraTargetModule(static_cast<LoraTarget>(t)));
      const std::string full = absl::StrCat("model.layers.0.", t < 4 ? "self_attn." : "mlp.", module);
      bool match = pattern == "all-linear";
      if (!match) {
        try {
          match = std::regex_match(full, std::regex(pattern)) || pattern == module;
        } catch (const std::regex_error&) {
          return Refuse(dir, absl::StrCat("target_modules \"", pattern, "\" is not a regular expression"));
        }
      }
      if (match) c.targets.insert(static_cast<LoraTarget>(t));
    }
    if (c.targets.empty()) {
      return Refuse(dir,
                    absl::StrCat("target_modules \"", pattern,
                                 "\" matches no projection of the base model; its projections are ", AllModules()));
    }
  } else {
    return Refuse(dir, "target_modules is neither a list of module names nor a string");
  }
  if (NonEmpty(j, "kvfleet_base_fingerprint") && j["kvfleet_base_fingerprint"].is_string()) {
    c.base_fingerprint = j["kvfleet_base_fingerprint"].get<std::string>();
  }
  return c;
}

}  // namespace

absl::StatusOr<LoraAdapter> ReadPeftAdapter(const std::string& dir, const std::string& name, const Model& base,
                                            const LoraLimits& limits) {
  ASSIGN_OR_RETURN(std::string config_text, ReadBytes(absl::StrCat(dir, "/", kConfigFile)));
  return ParsePeftAdapter(config_text, absl::StrCat(dir, "/", kWeightsFile), dir, name, base, limits);
}

absl::StatusOr<LoraAdapter> ParsePeftAdapter(std::string_view config_text, const std::string& weights_path,
                                             const std::string& dir, const std::string& name, const Model& base,
                                             const LoraLimits& limits) {
  ASSIGN_OR_RETURN(nlohmann::json json, ParseJson(config_text, absl::StrCat(dir, "/", kConfigFile)));
  if (!json.is_object()) return Refuse(dir, absl::StrCat(kConfigFile, " is not a JSON object"));
  ASSIGN_OR_RETURN(PeftConfig config, ReadConfig(dir, json, limits));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> opened = SafetensorsFile::Open(weights_path);
  if (!opened.ok())
    return absl::Status(opened.status().code(), absl::StrCat("LoRA adapter ", dir, ": ", opened.status().message()));
  const std::unique_ptr<SafetensorsFile>& weights = *opened;
  // The base's fingerprint, as kvfleet's tools record it: in the weights'
  // safetensors metadata (PEFT refuses unknown config keys), or in the config.
  std::string made_for = config.base_fingerprint;
  if (auto it = weights->metadata().find("kvfleet_base_fingerprint"); it != weights->metadata().end()) {
    made_for = it->second;
  }
  if (!made_for.empty() && !limits.base_fingerprint.empty() && made_for != limits.base_fingerprint) {
    return Refuse(dir, absl::StrCat("it was made for the base model with fingerprint ", made_for.substr(0, 12),
                                    "… (kvfleet_base_fingerprint), and this worker's base is ",
                                    limits.base_fingerprint.substr(0, 12), "…: load it on a worker of its own base"));
  }

  LoraAdapter a;
  a.name = name;
  a.rank = config.rank;
  a.alpha = config.alpha;
  a.rslora = config.rslora;
  a.scale = config.rslora ? config.alpha / std::sqrt(static_cast<double>(config.rank)) : config.alpha / config.rank;
  const std::vector<LayerWeights>& layers = base.weights().layers;
  a.layers.resize(layers.size());

  // base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight (an adapter name may sit before .weight).
  static const std::regex kTensor(
      R"(^(?:base_model\.model\.)?model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)\.lora_(A|B)(?:\.[A-Za-z0-9_]+)?\.weight$)");
  std::map<std::pair<int64_t, LoraTarget>, std::array<const TensorView*, 2>> found;  // [A, B]
  for (const TensorView& t : weights->tensors()) {
    if (t.name.find("lora_embedding") != std::string::npos || t.name.find("embed_tokens") != std::string::npos ||
        t.name.find("lm_head") != std::string::npos) {
      return Refuse(dir, absl::StrCat("tensor ", t.name, " adapts the embeddings or the head, which are not served"));
    }
    std::smatch m;
    if (!std::regex_match(t.name, m, kTensor)) {
      return Refuse(dir, absl::StrCat("tensor ", t.name, " is not a LoRA A or B of a layer's projection"));
    }
    if (m[1].length() > 6) return Refuse(dir, absl::StrCat("tensor ", t.name, " names a layer past any model's"));
    const int64_t layer = std::stoll(m[1].str());
    const std::optional<LoraTarget> target = TargetOf(m[3].str());
    if (!target.has_value()) {
      return Refuse(dir, absl::StrCat("tensor ", t.name, " adapts module ", m[3].str(),
                                      ", which the base model does not have; its projections are ", AllModules()));
    }
    if (layer >= static_cast<int64_t>(layers.size())) {
      return Refuse(dir, absl::StrCat("tensor ", t.name, " adapts layer ", layer, ", and the base model has ",
                                      layers.size(), " layers"));
    }
    found[{layer, *target}][m[4].str() == "A" ? 0 : 1] = &t;
  }
  if (found.empty()) return Refuse(dir, absl::StrCat(kWeightsFile, " holds no LoRA tensor"));
  // A GGUF Llama's Wq and Wk rows were permuted by its converter for
  // adjacent-pair RoPE; PEFT trained B against the checkpoint's order.
  const bool adjacent_pairs =
      !base.config().ropes.empty() && base.config().ropes.front().pairing == RopePairing::kAdjacent;
  for (const auto& [where, pair] : found) {
    const auto [layer, target] = where;
    const std::string module(LoraTargetModule(target));
    if (pair[0] == nullptr || pair[1] == nullptr) {
      return Refuse(dir, absl::StrCat("layer ", layer, " ", module, " has lora_", pair[0] == nullptr ? "B" : "A",
                                      " without its lora_", pair[0] == nullptr ? "A" : "B"));
    }
    const WeightView& w = *layers[static_cast<size_t>(layer)].Matrices()[static_cast<size_t>(target)];
    const TensorView& ta = *pair[0];
    const TensorView& tb = *pair[1];
    const std::vector<int64_t> want_a = {config.rank, w.cols}, want_b = {w.rows, config.rank};
    if (ta.shape != want_a || tb.shape != want_b) {
      return Refuse(dir, absl::StrCat("layer ", layer, " ", module, ": lora_A is [", absl::StrJoin(ta.shape, ", "),
                                      "] and lora_B [", absl::StrJoin(tb.shape, ", "), "]; rank ", config.rank,
                                      " on the base's [", w.rows, ", ", w.cols, "] needs [", config.rank, ", ", w.cols,
                                      "] and [", w.rows, ", ", config.rank, "]"));
    }
    LoraPair p{.in = w.cols, .out = w.rows};
    p.a.resize(static_cast<size_t>(ta.num_elements));
    for (int64_t i = 0; i < ta.num_elements; ++i) p.a[static_cast<size_t>(i)] = FloatElement(ta, i);
    p.b.resize(static_cast<size_t>(tb.num_elements));
    for (int64_t i = 0; i < tb.num_elements; ++i) p.b[static_cast<size_t>(i)] = FloatElement(tb, i);
    if (adjacent_pairs && (target == LoraTarget::kAttnQ || target == LoraTarget::kAttnK)) {
      ToAdjacentPairOrder(p.b, base.config().head_dim, config.rank);
    }
    a.layers[static_cast<size_t>(layer)][static_cast<size_t>(target)] = std::move(p);
  }
  ASSIGN_OR_RETURN(std::string weight_bytes, ReadBytes(weights_path));
  a.digest = Sha256Hex(absl::StrCat(Sha256Hex(config_text), Sha256Hex(weight_bytes)));
  return a;
}

}  // namespace kvfleet::model
