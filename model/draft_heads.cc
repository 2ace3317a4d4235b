#include "model/draft_heads.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/hf/json_config_reader.h"
#include "model/hf/safetensors_file.h"

namespace kvfleet::model {
namespace {

constexpr char kFormat[] = "kvfleet-draft-heads-v1";

absl::StatusOr<const TensorView*> FindTensor(const SafetensorsFile& file, const std::string& name,
                                             const std::vector<int64_t>& shape, const std::string& dir) {
  for (const TensorView& t : file.tensors()) {
    if (t.name != name) continue;
    if (t.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("draft heads ", dir, ": tensor ", name, " has the wrong shape"));
    }
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft heads ", dir, ": tensor ", name, " is not float32, float16 or bfloat16"));
    }
    return &t;
  }
  return absl::InvalidArgumentError(absl::StrCat("draft heads ", dir, ": tensor ", name, " is missing"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<const DraftHeads>> DraftHeads::Load(const std::string& dir, const Model& target,
                                                                   std::string_view target_path,
                                                                   std::string_view target_fingerprint) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  absl::StatusOr<nlohmann::json> config = ReadJsonFile(config_path);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft heads (--spec-draft-heads) ", dir, " did not load: ", config.status().message()));
  }
  const nlohmann::json& c = *config;
  const std::string target_name(target_path);
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("draft heads ", config_path, ": ", what));
  };
  if (!c.contains("format") || c["format"] != kFormat) return bad(absl::StrCat("\"format\" is not \"", kFormat, "\""));
  for (const char* key : {"hidden_size", "num_heads"}) {
    if (!c.contains(key) || !c[key].is_number_integer() || c[key].get<int64_t>() < 1) {
      return bad(absl::StrCat("\"", key, "\" must be a positive integer"));
    }
  }
  if (!c.contains("target_fingerprint") || !c["target_fingerprint"].is_string()) {
    return bad("\"target_fingerprint\" is missing");
  }
  if (!c.contains("vocab_ids") || !c["vocab_ids"].is_array() || c["vocab_ids"].empty()) {
    return bad("\"vocab_ids\" must be a non-empty list of token ids");
  }
  const int64_t hidden = c["hidden_size"].get<int64_t>();
  if (hidden != target.config().hidden_size) {
    return bad(absl::StrCat("the heads take hidden states of ", hidden, " values and the target ", target_name, " has ",
                            target.config().hidden_size));
  }
  const std::string fingerprint(target_fingerprint);
  if (c["target_fingerprint"].get<std::string>() != fingerprint) {
    return bad(absl::StrCat("the heads were trained for the model of fingerprint ",
                            c["target_fingerprint"].get<std::string>(), ", not for the target ", target_name,
                            " (fingerprint ", fingerprint, "); train heads for it with tools/heads"));
  }
  std::unique_ptr<DraftHeads> heads(new DraftHeads());
  const WeightView& output = target.weights().output;
  for (const nlohmann::json& id : c["vocab_ids"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= output.rows) {
      return bad(absl::StrCat("a vocab id is not a token of the target (0 to ", output.rows - 1, ")"));
    }
    heads->vocab_ids_.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  const std::string weights_path = (std::filesystem::path(dir) / "heads.safetensors").string();
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(weights_path));
  const int64_t k = c["num_heads"].get<int64_t>();
  std::vector<std::pair<DType, size_t>> matrices;  // each head's matrix: its type and storage index
  for (int64_t i = 0; i < k; ++i) {
    ASSIGN_OR_RETURN(const TensorView* w,
                     FindTensor(*file, absl::StrCat("head.", i, ".weight"), {hidden, hidden}, dir));
    ASSIGN_OR_RETURN(const TensorView* b, FindTensor(*file, absl::StrCat("head.", i, ".bias"), {hidden}, dir));
    // The matrix as stored (the kernels read every float type); the bias
    // as float32, as every vector weight is.
    heads->storage_.emplace_back(w->data, w->data + w->num_bytes);
    matrices.emplace_back(w->dtype, heads->storage_.size() - 1);
    std::vector<uint8_t> bias(static_cast<size_t>(hidden) * sizeof(float));
    for (int64_t j = 0; j < hidden; ++j) {
      const float v = FloatElement(*b, j);
      std::memcpy(bias.data() + j * sizeof(float), &v, sizeof(float));
    }
    heads->storage_.push_back(std::move(bias));
  }
  // The target's output head, for the draft vocabulary only, in its own
  // storage type: each row is whole blocks, copied as is.
  const int64_t row_bytes = RowBytes(output.dtype, output.cols);
  std::vector<uint8_t> rows(heads->vocab_ids_.size() * static_cast<size_t>(row_bytes));
  for (size_t v = 0; v < heads->vocab_ids_.size(); ++v) {
    std::memcpy(rows.data() + v * static_cast<size_t>(row_bytes),
                static_cast<const uint8_t*>(output.data) + heads->vocab_ids_[v] * row_bytes,
                static_cast<size_t>(row_bytes));
  }
  heads->storage_.push_back(std::move(rows));
  // Views last: the storage no longer moves.
  for (int64_t i = 0; i < k; ++i) {
    const auto [dtype, at] = matrices[static_cast<size_t>(i)];
    heads->weights_.heads.push_back({.weight = {.name = absl::StrCat("head.", i, ".weight"),
                                                .dtype = dtype,
                                                .rows = hidden,
                                                .cols = hidden,
                                                .data = heads->storage_[at].data()},
                                     .bias = {.name = absl::StrCat("head.", i, ".bias"),
                                              .dtype = DType::kF32,
                                              .rows = 1,
                                              .cols = hidden,
                                              .data = heads->storage_[at + 1].data()}});
  }
  heads->weights_.vocab_head = {.name = output.name + " (draft vocabulary)",
                                .dtype = output.dtype,
                                .rows = static_cast<int64_t>(heads->vocab_ids_.size()),
                                .cols = output.cols,
                                .data = heads->storage_.back().data()};
  return std::unique_ptr<const DraftHeads>(std::move(heads));
}

}  // namespace kvfleet::model
