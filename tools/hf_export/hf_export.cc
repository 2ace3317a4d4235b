#include "tools/hf_export/hf_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/float16.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "kernels/cpu/quantize.h"
#include "model/arch/architecture_registry.h"
#include "model/gguf/gguf_source.h"
#include "model/hf/json_config_writer.h"
#include "model/hf/safetensors_file.h"
#include "model/model.h"
#include "tools/hf_export/tokenizer_json.h"

namespace kvfleet::tools {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const char* TorchDtype(DType t) { return t == DType::kBF16 ? "bfloat16" : t == DType::kF16 ? "float16" : "float32"; }

// config.json: the model's identity, then the keys its architecture writes
// (the inverse of its ReadConfig for checkpoints), then what the caller
// states that a GGUF does not.
absl::StatusOr<Json> ConfigJson(const model::Model& m, const model::Architecture& arch, DType dtype,
                                const nlohmann::json& extras) {
  const model::ModelConfig& c = m.config();
  const model::Vocabulary& v = m.vocabulary();
  Json j{{"architectures", Json::array({std::string(arch.hf_names[0])})},
         {"model_type", std::string(arch.hf_model_type)},
         {"torch_dtype", TorchDtype(dtype)}};
  if (v.bos.has_value()) j["bos_token_id"] = *v.bos;
  if (v.eos.has_value()) j["eos_token_id"] = *v.eos;
  model::JsonConfigWriter writer(j);
  arch.write_config(c, model::ModelFormat::kHuggingFace, writer);
  for (const auto& [key, value] : extras.items()) j[key] = value;
  if (!c.ropes[0].freq_factors.empty() && !j.contains("rope_scaling")) {
    return absl::InvalidArgumentError(
        "the GGUF carries Llama 3 RoPE frequency factors (rope_freqs.weight); a checkpoint states the rope_scaling "
        "they came from: pass it in config_extras");
  }
  return j;
}

// A GGUF tensor's checkpoint name and spec; nullopt for one the
// architecture does not list.
struct HfTensor {
  std::string name;
  const model::TensorSpec* spec;
};
std::optional<HfTensor> HfTensorOf(const model::Architecture& arch, const std::string& gguf) {
  for (const model::TensorSpec& n : model::names::kModelTensors) {
    if (gguf == n.gguf) return HfTensor{std::string(n.hf), &n};
  }
  const size_t dot = gguf.find('.', 4);
  int64_t layer = -1;
  if (absl::StartsWith(gguf, "blk.") && dot != std::string::npos &&
      absl::SimpleAtoi(absl::string_view(gguf).substr(4, dot - 4), &layer)) {
    const std::string suffix = gguf.substr(dot + 1);
    for (const model::TensorSpec& n : arch.layer_tensors) {
      if (suffix == n.gguf) return HfTensor{absl::StrCat("model.layers.", layer, ".", std::string(n.hf)), &n};
    }
  }
  return std::nullopt;
}

// Rows of one head, GGUF (adjacent pairs, as llama.cpp's converter permuted
// them) back to the checkpoint's halves: HF row h·d + half·d/2 + i is GGUF
// row h·d + 2i + half.
std::vector<float> UnpermuteRows(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
  const int64_t d = rows / heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t hf = h * d + half * d / 2 + i, gguf = h * d + 2 * i + half;
        std::copy_n(w.begin() + gguf * cols, cols, out.begin() + hf * cols);
      }
    }
  }
  return out;
}

std::vector<uint8_t> Encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * Traits(dtype).block_bytes);
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  auto* p = reinterpret_cast<uint16_t*>(out.data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = dtype == DType::kBF16 ? FloatToBf16(values[i]) : FloatToHalf(values[i]);
  return out;
}

}  // namespace

absl::Status HfExportOptions::Validate() const {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat("a checkpoint's dtype is f32, f16 or bf16, not ", DTypeName(dtype)));
  }
  if (shards < 1 || shards > 1000) return absl::InvalidArgumentError(absl::StrCat("--shards ", shards, ": 1 to 1000"));
  return absl::OkStatus();
}

absl::Status ExportHfCheckpoint(const std::string& gguf_path, const std::string& out_dir,
                                const HfExportOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(gguf_path));
  const auto* gguf = dynamic_cast<const model::GgufSource*>(&m->source());
  if (gguf == nullptr) return absl::InvalidArgumentError(absl::StrCat(gguf_path, ": not a GGUF file"));
  const model::Architecture* arch = model::FindArchitectureByName(m->config().architecture);
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", out_dir, ": ", ec.message()));

  ASSIGN_OR_RETURN(Json tokenizer, TokenizerJson(m->vocabulary()));
  RETURN_IF_ERROR(WriteFile(dir / "tokenizer.json", tokenizer.dump()));
  RETURN_IF_ERROR(WriteFile(dir / "tokenizer_config.json",
                            TokenizerConfigJson(m->vocabulary(), m->config().context_length).dump(2)));
  if (options.tokenizer_only) return absl::OkStatus();

  ASSIGN_OR_RETURN(Json config, ConfigJson(*m, *arch, options.dtype, options.config_extras));
  RETURN_IF_ERROR(WriteFile(dir / "config.json", config.dump(2)));
  Json generation{{"do_sample", false}};
  if (m->vocabulary().bos.has_value()) generation["bos_token_id"] = *m->vocabulary().bos;
  if (m->vocabulary().eos.has_value()) generation["eos_token_id"] = *m->vocabulary().eos;
  RETURN_IF_ERROR(WriteFile(dir / "generation_config.json", generation.dump(2)));

  // Every tensor, converted, in the GGUF's order; then cut into shards of
  // about equal bytes.
  const model::ModelConfig& c = m->config();
  std::vector<model::SafetensorsEntry> entries;
  int64_t total = 0;
  for (const model::TensorInfo& t : gguf->file().tensors()) {
    const std::optional<HfTensor> hf = HfTensorOf(*arch, t.name);
    if (!hf.has_value()) {
      // Checkpoints carry no frequency factors: config.json's rope_scaling says them.
      if (std::ranges::any_of(arch->config_tensors, [&](const model::TensorSpec& s) { return t.name == s.gguf; })) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(gguf_path, ": tensor '", t.name, "' has no checkpoint name for ",
                                                     c.architecture));
    }
    const int64_t cols = t.shape[0], rows = t.num_elements / cols;
    std::vector<float> values(static_cast<size_t>(t.num_elements));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::DequantizeRow(t.dtype, t.data + r * RowBytes(t.dtype, cols), values.data() + r * cols, cols);
    }
    if (arch->gguf_rope_pairing == model::RopePairing::kAdjacent &&
        (absl::EndsWith(t.name, "attn_q.weight") || absl::EndsWith(t.name, "attn_k.weight"))) {
      values = UnpermuteRows(values, rows, cols, absl::EndsWith(t.name, "attn_q.weight") ? c.num_heads : c.num_kv_heads);
    }
    if (arch->hf_norm_offset != 0.0f && hf->spec->kind == model::TensorKind::kNorm) {
      for (float& x : values) x -= arch->hf_norm_offset;
    }
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());
    entries.push_back(
        {.name = hf->name, .dtype = options.dtype, .shape = std::move(shape), .data = Encode(values, options.dtype)});
    total += static_cast<int64_t>(entries.back().data.size());
  }
  if (options.shards == 1) return WriteFile(dir / "model.safetensors", model::SerializeSafetensors(entries));
  Json weight_map = Json::object();
  const int64_t per_shard = (total + options.shards - 1) / options.shards;
  size_t next = 0;
  for (int s = 1; s <= options.shards; ++s) {
    const std::string file = absl::StrFormat("model-%05d-of-%05d.safetensors", s, options.shards);
    std::vector<model::SafetensorsEntry> shard;
    int64_t bytes = 0;
    while (next < entries.size() && (bytes < per_shard || s == options.shards)) {
      bytes += static_cast<int64_t>(entries[next].data.size());
      weight_map[entries[next].name] = file;
      shard.push_back(std::move(entries[next++]));
    }
    RETURN_IF_ERROR(WriteFile(dir / file, model::SerializeSafetensors(shard)));
  }
  const Json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return WriteFile(dir / "model.safetensors.index.json", index.dump(2));
}

}  // namespace kvfleet::tools
