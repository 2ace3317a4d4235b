#include "model/lora/peft_adapter_writer.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/hf/safetensors_file.h"
#include "nlohmann/json.hpp"

namespace kvfleet::model {
namespace {

bool IsAttention(Projection p) { return p <= Projection::kAttnOutput; }

SafetensorsEntry Entry(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& values) {
  SafetensorsEntry e{.name = name, .dtype = DType::kF32, .shape = {rows, cols}};
  e.data.resize(values.size() * sizeof(float));
  std::memcpy(e.data.data(), values.data(), e.data.size());
  return e;
}

absl::Status WriteFile(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status WritePeftAdapter(const LoraAdapter& adapter, const std::string& dir, std::string_view base_fingerprint,
                              const ModelConfig* base) {
  const bool adjacent_pairs =
      base != nullptr && !base->ropes.empty() && base->ropes.front().pairing == RopePairing::kAdjacent;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::vector<SafetensorsEntry> tensors;
  std::set<std::string> modules;
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (int t = 0; t < kLoraTargets; ++t) {
      const std::optional<LoraPair>& pair = adapter.layers[l][static_cast<size_t>(t)];
      if (!pair.has_value()) continue;
      const Projection p = static_cast<Projection>(t);
      const std::string module(LoraTargetModule(p));
      modules.insert(module);
      const std::string prefix =
          absl::StrCat("base_model.model.model.layers.", l, IsAttention(p) ? ".self_attn." : ".mlp.", module, ".lora_");
      tensors.push_back(Entry(prefix + "A.weight", adapter.rank, pair->in, pair->a));
      if (adjacent_pairs && (p == Projection::kAttnQ || p == Projection::kAttnK)) {
        std::vector<float> b = pair->b;
        FromAdjacentPairOrder(b, base->head_dim, adapter.rank);
        tensors.push_back(Entry(prefix + "B.weight", pair->out, adapter.rank, b));
      } else {
        tensors.push_back(Entry(prefix + "B.weight", pair->out, adapter.rank, pair->b));
      }
    }
  }
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", adapter.rank},
                           {"lora_alpha", adapter.alpha},
                           {"use_rslora", adapter.rslora},
                           {"use_dora", false},
                           {"bias", "none"},
                           {"lora_dropout", 0.0},
                           {"fan_in_fan_out", false},
                           {"modules_to_save", nullptr},
                           {"target_modules", std::vector<std::string>(modules.begin(), modules.end())}};
  // In the weights' metadata, where PEFT, which refuses unknown config keys, ignores it.
  std::map<std::string, std::string> metadata;
  if (!base_fingerprint.empty()) metadata["kvfleet_base_fingerprint"] = std::string(base_fingerprint);
  const std::string text = config.dump(2) + "\n";
  const std::vector<uint8_t> weights = SerializeSafetensors(tensors, metadata);
  RETURN_IF_ERROR(WriteFile(dir + "/adapter_config.json", text.data(), text.size()));
  return WriteFile(dir + "/adapter_model.safetensors", weights.data(), weights.size());
}

}  // namespace kvfleet::model
