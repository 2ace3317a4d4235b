// Draft heads for tests: random (or zero) heads for a model, written in
// the format DraftHeads::Load reads, with the model's fingerprint and every
// token in the draft vocabulary.
//
//   WriteDraftHeads(model, dir.Path("heads"), {.num_heads = 3, .scale = 0.05f});
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quantize.h"
#include "model/hf/safetensors_file.h"
#include "model/model.h"
#include "model/model_fingerprint.h"
#include "nlohmann/json.hpp"

namespace kvfleet::testing {

struct DraftHeadsSpec {
  int32_t num_heads = 3;
  float scale = 0.05f;  // weights uniform in [-scale, scale]; 0: untrained heads (each repeats the target's guess)
  uint32_t seed = 1;
  std::string fingerprint;  // empty: the model's own
};

inline void WriteDraftHeads(const model::Model& m, const std::string& dir, const DraftHeadsSpec& spec) {
  std::filesystem::create_directories(dir);
  const int64_t h = m.config().hidden_size;
  std::mt19937 rng(spec.seed);
  std::uniform_real_distribution<float> uniform(-spec.scale, spec.scale);
  std::vector<model::SafetensorsEntry> tensors;
  for (int32_t i = 0; i < spec.num_heads; ++i) {
    for (auto [name, count] :
         {std::pair{absl::StrCat("head.", i, ".weight"), h * h}, std::pair{absl::StrCat("head.", i, ".bias"), h}}) {
      std::vector<float> values(static_cast<size_t>(count));
      for (float& v : values) v = spec.scale > 0 ? uniform(rng) : 0.0f;
      std::vector<uint8_t> bytes(values.size() * sizeof(float));
      std::memcpy(bytes.data(), values.data(), bytes.size());
      tensors.push_back({.name = name,
                         .dtype = DType::kF32,
                         .shape = count == h ? std::vector<int64_t>{h} : std::vector<int64_t>{h, h},
                         .data = std::move(bytes)});
    }
  }
  const std::vector<uint8_t> file = model::SerializeSafetensors(tensors);
  std::ofstream(std::filesystem::path(dir) / "heads.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  nlohmann::json config;
  config["format"] = "kvfleet-draft-heads-v1";
  config["target_fingerprint"] = spec.fingerprint.empty() ? model::ModelFingerprint(m) : spec.fingerprint;
  config["hidden_size"] = h;
  config["num_heads"] = spec.num_heads;
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < m.weights().output.rows; ++t) ids.push_back(t);
  config["vocab_ids"] = ids;
  std::ofstream(std::filesystem::path(dir) / "config.json") << config.dump();
}

}  // namespace kvfleet::testing
