#include "tools/draft_model/make_draft.h"

#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quantize.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_source.h"
#include "model/gguf/gguf_writer.h"
#include "model/model.h"

namespace kvfleet::tools {
namespace {

using model::GgufType;
using model::GgufValue;

// What the draft keeps of one target.
struct DraftPlan {
  const model::GgufFile& target;
  const model::ModelConfig& hp;
  int64_t layers = 0;
  std::optional<DType> weight_type;
};

// The index i of a tensor named "blk.{i}.*"; nullopt outside the blocks.
std::optional<int64_t> BlockIndex(const std::string& name) {
  constexpr absl::string_view kPrefix = "blk.";
  if (!absl::StartsWith(name, kPrefix)) return std::nullopt;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  int64_t i = 0;
  const auto [p, ec] = std::from_chars(begin, end, i);
  if (ec != std::errc() || p == end || *p != '.') return std::nullopt;
  return i;
}

bool IsInteger(const GgufValue& v) {
  return v.type != GgufType::kArray &&
         (std::holds_alternative<int64_t>(v.scalar) || std::holds_alternative<uint64_t>(v.scalar));
}

// `like` with its scalar replaced by n, keeping its integer type.
GgufValue WithInt(GgufValue like, int64_t n) {
  if (std::holds_alternative<int64_t>(like.scalar)) {
    like.scalar = n;
  } else {
    like.scalar = static_cast<uint64_t>(n);
  }
  return like;
}

std::string DraftName(const DraftPlan& plan) {
  const std::string& base = plan.hp.name.empty() ? plan.hp.architecture : plan.hp.name;
  return absl::StrCat(base, " draft (", plan.layers, plan.layers == 1 ? " layer" : " layers",
                      plan.weight_type ? absl::StrCat(", ", DTypeName(*plan.weight_type)) : "", ")");
}

// Every key of the target, with the overrides listed in make_draft.h.
void CopyMetadata(const DraftPlan& plan, model::GgufWriter& w) {
  const std::string arch = plan.hp.architecture + ".";
  bool named = false;
  for (const auto& [key, value] : plan.target.metadata()) {
    if (key == arch + "block_count") {
      w.SetValue(key, WithInt(value, plan.layers));
    } else if (key == "general.name") {
      w.SetString(key, DraftName(plan));
      named = true;
    } else if (key == "general.file_type" && plan.weight_type && IsInteger(value)) {
      w.SetValue(key, WithInt(value, Traits(*plan.weight_type).llama_ftype));
    } else if (key == "general.alignment") {
      // GgufWriter aligns tensor data to 32; any other value would misplace it.
      if (plan.target.alignment() == 32) w.SetValue(key, value);
    } else if (value.type == GgufType::kArray && absl::StartsWith(key, arch) &&
               static_cast<int64_t>(value.array.size()) == plan.hp.num_layers) {
      // A per-layer hyperparameter (e.g. head_count_kv in some conversions).
      GgufValue cut = value;
      cut.array.resize(plan.layers);
      w.SetValue(key, cut);
    } else {
      w.SetValue(key, value);
    }
  }
  if (!named) w.SetString("general.name", DraftName(plan));
}

bool ShouldConvert(const model::TensorInfo& t, std::optional<DType> to) {
  return to.has_value() && t.shape.size() == 2 && t.shape[0] % RoundUpToBlock(*to, 1) == 0 && t.dtype != *to;
}

// A [rows, cols] matrix (GGUF shape {cols, rows}) converted row by row
// through float32.
std::vector<uint8_t> Convert(const model::TensorInfo& t, DType to) {
  const int64_t cols = t.shape[0], rows = t.shape[1];
  const int64_t src_row = RowBytes(t.dtype, cols), dst_row = RowBytes(to, cols);
  std::vector<uint8_t> out(rows * dst_row);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::DequantizeRow(t.dtype, t.data + r * src_row, row.data(), cols);
    kernels::QuantizeRow(to, row.data(), out.data() + r * dst_row, cols);
  }
  return out;
}

// The target's tensors in order, without the blocks past the plan's layers.
// Unchanged ones are views into the target's mapping.
void CopyTensors(const DraftPlan& plan, model::GgufWriter& w) {
  for (const model::TensorInfo& t : plan.target.tensors()) {
    const std::optional<int64_t> block = BlockIndex(t.name);
    if (block && *block >= plan.layers) continue;
    if (ShouldConvert(t, plan.weight_type)) {
      w.AddTensor(t.name, t.shape, *plan.weight_type, Convert(t, *plan.weight_type));
    } else {
      w.AddTensorView(t.name, t.shape, t.dtype, std::span<const uint8_t>(t.data, t.num_bytes));
    }
  }
}

// The draft must load like any model before it takes out_path's place.
absl::Status VerifyDraft(const std::string& path, int64_t layers) {
  auto draft = model::Model::Load(path);
  if (!draft.ok()) {
    return absl::InternalError(absl::StrCat("the draft does not load: ", draft.status().message()));
  }
  if ((*draft)->config().num_layers != layers) {
    return absl::InternalError(
        absl::StrCat("the draft loads with ", (*draft)->config().num_layers, " layers instead of ", layers));
  }
  return absl::OkStatus();
}

// Writes to a temporary file beside out_path and renames it into place, so a
// failure leaves neither a partial draft nor a changed out_path.
absl::Status WriteDraft(const model::GgufWriter& w, const std::string& out_path, int64_t layers) {
  const std::string tmp = absl::StrCat(out_path, ".tmp.", getpid());
  absl::Status s = w.WriteFile(tmp);
  if (s.ok()) s = VerifyDraft(tmp, layers);
  if (s.ok()) {
    std::error_code ec;
    std::filesystem::rename(tmp, out_path, ec);
    if (ec) s = absl::PermissionDeniedError(absl::StrCat("cannot rename ", tmp, " into place: ", ec.message()));
  }
  if (!s.ok()) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return absl::Status(s.code(), absl::StrCat("writing the draft to ", out_path, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDraftOptions::Validate() const {
  if (keep_layers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_layers must be >= 0 (0 keeps every layer), not ", keep_layers));
  }
  return absl::OkStatus();
}

absl::Status MakeDraftModel(const std::string& target_path, const std::string& out_path, const MakeDraftOptions& opts) {
  RETURN_IF_ERROR(opts.Validate());
  std::error_code ec;
  if (std::filesystem::equivalent(target_path, out_path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(out_path, ": the draft's output path is the target model itself; choose another"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> target, model::Model::Load(target_path));
  const int64_t target_layers = target->config().num_layers;
  if (opts.keep_layers > target_layers) {
    return absl::InvalidArgumentError(absl::StrCat(target_path, ": cannot keep ", opts.keep_layers,
                                                   " layers: the model has ", target_layers, " (keep 1 to ",
                                                   target_layers, ", or 0 for all)"));
  }
  const auto* gguf = dynamic_cast<const model::GgufSource*>(&target->source());
  if (gguf == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(target_path, ": a draft is cut from a GGUF file; this is a ",
                                                   model::ModelFormatName(target->source().format()), " model"));
  }
  const DraftPlan plan{.target = gguf->file(),
                       .hp = target->config(),
                       .layers = opts.keep_layers == 0 ? target_layers : opts.keep_layers,
                       .weight_type = opts.weight_type};
  model::GgufWriter w;
  CopyMetadata(plan, w);
  CopyTensors(plan, w);
  return WriteDraft(w, out_path, plan.layers);
}

}  // namespace kvfleet::tools
