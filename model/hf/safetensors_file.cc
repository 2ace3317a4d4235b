#include "model/hf/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/hf/json_config_reader.h"
#include "nlohmann/json.hpp"

namespace kvfleet::model {
namespace {

// The header's upper bound: safetensors' own reader caps it at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

absl::StatusOr<DType> DTypeOf(const std::string& path, const std::string& tensor, const std::string& name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return absl::UnimplementedError(
      absl::StrCat(path, ": tensor '", tensor, "' has dtype ", name,
                   "; kvfleet reads F32, F16 and BF16 checkpoints (FP8, integer and GPTQ/AWQ packed weights are not "
                   "supported: convert the model to bf16, or use a GGUF file)"));
}

const char* DTypeCode(DType t) {
  switch (t) {
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    default:
      return "F32";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile(std::move(mapping)));
  RETURN_IF_ERROR(f->Parse());
  return f;
}

absl::Status SafetensorsFile::Parse() {
  const std::string& p = path();
  const std::span<const uint8_t> bytes = mapping_.bytes();
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, "; the file is truncated or not a safetensors file"));
  };
  if (bytes.size() < 8) return bad(absl::StrCat("only ", bytes.size(), " bytes, less than the 8-byte header length"));
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8) {
    return bad(absl::StrCat("header length ", header_len, " runs past the end of the ", bytes.size(), "-byte file"));
  }
  const char* header = reinterpret_cast<const char*>(bytes.data() + 8);
  const absl::StatusOr<nlohmann::json> parsed = ParseJson(std::string_view(header, header_len), "the header");
  if (!parsed.ok()) return bad(std::string(parsed.status().message()));
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return bad("the header is not a JSON object");
  const uint64_t data_start = 8 + header_len, data_size = bytes.size() - data_start;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (entry.is_object()) {
        for (const auto& [key, value] : entry.items()) {
          if (value.is_string()) metadata_[key] = value.get<std::string>();
        }
      }
      continue;
    }
    const std::string what = absl::StrCat("tensor '", name, "'");
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      return bad(absl::StrCat(what, " lacks a dtype, a shape or two data_offsets"));
    }
    ASSIGN_OR_RETURN(DType dtype, DTypeOf(p, name, entry["dtype"].get<std::string>()));
    TensorView t{.name = name, .dtype = dtype, .num_elements = 1};
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
        return bad(absl::StrCat(what, " has an invalid dimension ", d.dump()));
      }
      const int64_t dim = static_cast<int64_t>(d.get<uint64_t>());
      if (dim != 0 && t.num_elements > std::numeric_limits<int64_t>::max() / 4 / dim) {
        return bad(absl::StrCat(what, " has too many elements"));
      }
      t.shape.push_back(dim);
      t.num_elements *= dim;
    }
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(absl::StrCat(what, ": bad data_offsets"));
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad(absl::StrCat(what, " spans bytes [", begin, ", ", end, ") of a data section of ", data_size));
    }
    t.num_bytes = t.num_elements * Traits(dtype).block_bytes;
    if (end - begin != static_cast<uint64_t>(t.num_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": dtype ", DTypeCode(dtype), " and shape [",
                                                     t.num_elements, " elements] need ", t.num_bytes,
                                                     " bytes, but its data_offsets span ", end - begin));
    }
    t.data = bytes.data() + data_start + begin;
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return bad(absl::StrCat("tensors '", tensors_[ranges[i - 1].index].name, "' and '",
                              tensors_[ranges[i].index].name, "' overlap"));
    }
  }
  std::vector<TensorView> ordered;
  ordered.reserve(tensors_.size());
  for (const Range& r : ranges) ordered.push_back(std::move(tensors_[r.index]));
  tensors_ = std::move(ordered);
  return absl::OkStatus();
}

std::vector<uint8_t> SerializeSafetensors(const std::vector<SafetensorsEntry>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    header[t.name] = {
        {"dtype", DTypeCode(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // data 8-byte aligned, as safetensors writes it
  const uint64_t len = text.size();
  std::vector<uint8_t> out(static_cast<size_t>(8 + len + offset));
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* at = out.data() + 8 + len;
  for (const SafetensorsEntry& t : tensors) {
    if (!t.data.empty()) std::memcpy(at, t.data.data(), t.data.size());
    at += t.data.size();
  }
  return out;
}

}  // namespace kvfleet::model
