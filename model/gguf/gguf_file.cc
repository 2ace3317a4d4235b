#include "model/gguf/gguf_file.h"

#include <cstring>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::model {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
// Bounds that keep a corrupt count from turning into a giant allocation.
constexpr uint64_t kMaxStringBytes = 1ull << 26;
constexpr uint64_t kMaxArrayElements = 1ull << 26;
constexpr uint32_t kMaxDims = 4;

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const std::string& path, std::span<const uint8_t> bytes) : path_(path), bytes_(bytes) {}

  size_t pos() const { return pos_; }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (bytes_.size() - pos_ < sizeof(T)) return Truncated(what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what) {
    ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what));
    if (len > kMaxStringBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": ", what, ": string length ", len, " at byte ", pos_ - 8, " is implausible"));
    }
    if (bytes_.size() - pos_ < len) return Truncated(what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  absl::Status Truncated(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": file is truncated: ", what, " at byte ", pos_,
                                                   " runs past the end of the file (", bytes_.size(), " bytes)"));
  }

 private:
  const std::string& path_;
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

absl::StatusOr<GgufScalar> ReadScalar(Cursor& c, GgufType type, const std::string& what) {
  switch (type) {
    case GgufType::kUint8: { ASSIGN_OR_RETURN(auto v, c.Read<uint8_t>(what)); return GgufScalar(uint64_t{v}); }
    case GgufType::kInt8: { ASSIGN_OR_RETURN(auto v, c.Read<int8_t>(what)); return GgufScalar(int64_t{v}); }
    case GgufType::kUint16: { ASSIGN_OR_RETURN(auto v, c.Read<uint16_t>(what)); return GgufScalar(uint64_t{v}); }
    case GgufType::kInt16: { ASSIGN_OR_RETURN(auto v, c.Read<int16_t>(what)); return GgufScalar(int64_t{v}); }
    case GgufType::kUint32: { ASSIGN_OR_RETURN(auto v, c.Read<uint32_t>(what)); return GgufScalar(uint64_t{v}); }
    case GgufType::kInt32: { ASSIGN_OR_RETURN(auto v, c.Read<int32_t>(what)); return GgufScalar(int64_t{v}); }
    case GgufType::kUint64: { ASSIGN_OR_RETURN(auto v, c.Read<uint64_t>(what)); return GgufScalar(v); }
    case GgufType::kInt64: { ASSIGN_OR_RETURN(auto v, c.Read<int64_t>(what)); return GgufScalar(v); }
    case GgufType::kFloat32: { ASSIGN_OR_RETURN(auto v, c.Read<float>(what)); return GgufScalar(double{v}); }
    case GgufType::kFloat64: { ASSIGN_OR_RETURN(auto v, c.Read<double>(what)); return GgufScalar(v); }
    case GgufType::kBool: {
      ASSIGN_OR_RETURN(auto v, c.Read<uint8_t>(what));
      return GgufScalar(v != 0);
    }
    case GgufType::kString: { ASSIGN_OR_RETURN(auto v, c.ReadString(what)); return GgufScalar(std::move(v)); }
    case GgufType::kArray: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": unknown value type ", static_cast<uint32_t>(type)));
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

absl::StatusOr<DType> DTypeFromCode(uint32_t code) {
  if (const std::optional<DType> t = DTypeOfGgmlType(code)) return *t;
  std::string supported;
  for (DType t : kAllDTypes) supported += (supported.empty() ? "" : ", ") + std::string(DTypeName(t));
  return absl::UnimplementedError(absl::StrCat("type ", GgmlTypeName(code), " is not supported (supported: ",
                                               supported, "); requantize the model with one of these"));
}

}  // namespace

std::string GgmlTypeName(uint32_t code) {
  // ggml's enum ggml_type, in order (4 and 5 were removed types).
  static constexpr const char* kNames[] = {
      "F32",     "F16",    "Q4_0",  "Q4_1",  "Q4_2", "Q4_3",    "Q5_0",  "Q5_1",  "Q8_0", "Q8_1",
      "Q2_K",    "Q3_K",   "Q4_K",  "Q5_K",  "Q6_K", "Q8_K",    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL",  "IQ3_S",  "IQ2_S", "IQ4_XS", "I8",  "I16",     "I32",   "I64",   "F64",  "IQ1_M",
      "BF16",    "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8",
      "IQ4_NL_8_8", "MXFP4"};
  if (code < std::size(kNames)) return kNames[code];
  return absl::StrCat("type code ", code);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::Open(path));
  std::unique_ptr<GgufFile> file(new GgufFile(std::move(mapping)));
  RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::Status GgufFile::Parse() {
  const std::string& p = path();
  const std::span<const uint8_t> bytes = mapping_.bytes();
  Cursor c(p, bytes);
  ASSIGN_OR_RETURN(uint32_t magic, c.Read<uint32_t>("magic"));
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrCat(p, ": bad magic: not a GGUF file (first bytes are not 'GGUF')"));
  }
  ASSIGN_OR_RETURN(version_, c.Read<uint32_t>("version"));
  if (version_ != 2 && version_ != 3) {
    return absl::UnimplementedError(
        absl::StrCat(p, ": GGUF version ", version_, " is not supported (supported: 2 and 3)"));
  }
  ASSIGN_OR_RETURN(uint64_t tensor_count, c.Read<uint64_t>("tensor count"));
  ASSIGN_OR_RETURN(uint64_t kv_count, c.Read<uint64_t>("metadata count"));
  // Each entry takes at least a few bytes; a count beyond that is corrupt.
  if (tensor_count > bytes.size() / 8 || kv_count > bytes.size() / 8) {
    return absl::InvalidArgumentError(absl::StrCat(p, ": ", tensor_count, " tensors and ", kv_count,
                                                   " metadata entries cannot fit in a ", bytes.size(),
                                                   "-byte file; the file is truncated or corrupt"));
  }

  for (uint64_t i = 0; i < kv_count; ++i) {
    ASSIGN_OR_RETURN(std::string key, c.ReadString(absl::StrCat("metadata key #", i)));
    const std::string what = absl::StrCat("metadata '", key, "'");
    ASSIGN_OR_RETURN(uint32_t raw_type, c.Read<uint32_t>(what));
    if (!IsKnownType(raw_type)) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": unknown value type ", raw_type));
    }
    GgufValue value;
    value.type = static_cast<GgufType>(raw_type);
    if (value.type == GgufType::kArray) {
      ASSIGN_OR_RETURN(uint32_t raw_elem, c.Read<uint32_t>(what));
      if (!IsKnownType(raw_elem) || raw_elem == static_cast<uint32_t>(GgufType::kArray)) {
        return absl::InvalidArgumentError(
            absl::StrCat(p, ": ", what, ": unsupported array element type ", raw_elem));
      }
      value.element_type = static_cast<GgufType>(raw_elem);
      ASSIGN_OR_RETURN(uint64_t n, c.Read<uint64_t>(what));
      if (n > kMaxArrayElements || n > bytes.size()) {
        return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": implausible array length ", n));
      }
      value.array.reserve(n);
      for (uint64_t j = 0; j < n; ++j) {
        auto elem = ReadScalar(c, value.element_type, what);
        if (!elem.ok()) return absl::InvalidArgumentError(absl::StrCat(p, ": ", elem.status().message()));
        value.array.push_back(std::move(*elem));
      }
    } else {
      auto scalar = ReadScalar(c, value.type, what);
      if (!scalar.ok()) return absl::InvalidArgumentError(absl::StrCat(p, ": ", scalar.status().message()));
      value.scalar = std::move(*scalar);
    }
    metadata_[key] = std::move(value);
  }

  if (Has("general.alignment")) {
    ASSIGN_OR_RETURN(int64_t a, GetInt("general.alignment"));
    if (a <= 0 || (a & (a - 1)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(p, ": metadata 'general.alignment' = ", a, " is not a positive power of two"));
    }
    alignment_ = static_cast<uint64_t>(a);
  }

  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t;
    ASSIGN_OR_RETURN(t.name, c.ReadString(absl::StrCat("tensor #", i, " name")));
    const std::string what = absl::StrCat("tensor '", t.name, "'");
    ASSIGN_OR_RETURN(uint32_t n_dims, c.Read<uint32_t>(what));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": ", n_dims, " dimensions (expected 1 to 4)"));
    }
    t.num_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(uint64_t dim, c.Read<uint64_t>(what));
      if (dim == 0 || dim > (1ull << 40) ||
          static_cast<uint64_t>(t.num_elements) > (std::numeric_limits<int64_t>::max() / dim)) {
        return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": invalid dimension ", dim));
      }
      t.shape.push_back(static_cast<int64_t>(dim));
      t.num_elements *= static_cast<int64_t>(dim);
    }
    ASSIGN_OR_RETURN(uint32_t type_code, c.Read<uint32_t>(what));
    auto dtype = DTypeFromCode(type_code);
    if (!dtype.ok()) {
      return absl::Status(dtype.status().code(), absl::StrCat(p, ": ", what, ": ", dtype.status().message()));
    }
    t.dtype = *dtype;
    const DTypeTraits tr = Traits(t.dtype);
    if (t.shape[0] % tr.block_elems != 0) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": row length ", t.shape[0],
                                                     " is not a multiple of the ", tr.name, " block size ",
                                                     tr.block_elems));
    }
    // Its byte size must be representable before it is compared with the
    // file's (found by tests/fuzz/gguf_fuzz.cc: a signed overflow).
    const int64_t blocks = t.num_elements / tr.block_elems;
    if (blocks > std::numeric_limits<int64_t>::max() / tr.block_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(p, ": ", what, ": ", t.num_elements, " elements of ", tr.name, " do not fit in any file"));
    }
    t.num_bytes = blocks * tr.block_bytes;
    ASSIGN_OR_RETURN(t.offset, c.Read<uint64_t>(what));
    if (t.offset % alignment_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(p, ": ", what, ": data offset ", t.offset, " is not aligned to ", alignment_));
    }
    if (tensor_index_.count(t.name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", what, ": duplicate tensor name"));
    }
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (TensorInfo& t : tensors_) {
    const uint64_t size = bytes.size();
    if (data_start > size || t.offset > size - data_start ||
        static_cast<uint64_t>(t.num_bytes) > size - data_start - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          p, ": tensor '", t.name, "': data [", data_start + t.offset, ", ", data_start + t.offset + t.num_bytes,
          ") lies outside the file (", size, " bytes); the file is truncated or corrupt"));
    }
    t.data = bytes.data() + data_start + t.offset;
  }
  return absl::OkStatus();
}

absl::StatusOr<const GgufValue*> GgufFile::Lookup(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) {
    return absl::NotFoundError(absl::StrCat(path(), ": metadata key '", key, "' is missing"));
  }
  return &it->second;
}

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  if (v->type != GgufType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not a string"));
  }
  return std::get<std::string>(v->scalar);
}

namespace {
std::optional<int64_t> AsInt(const GgufScalar& s) {
  if (const auto* i = std::get_if<int64_t>(&s)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&s)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}
std::optional<double> AsFloat(const GgufScalar& s) {
  if (const auto* d = std::get_if<double>(&s)) return *d;
  if (auto i = AsInt(s)) return static_cast<double>(*i);
  return std::nullopt;
}
}  // namespace

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  auto i = v->type == GgufType::kArray ? std::nullopt : AsInt(v->scalar);
  if (!i) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not an integer"));
  }
  return *i;
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  auto f = v->type == GgufType::kArray ? std::nullopt : AsFloat(v->scalar);
  if (!f) return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not a number"));
  return *f;
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  if (v->type != GgufType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not a bool"));
  }
  return std::get<bool>(v->scalar);
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  if (v->type != GgufType::kArray || v->element_type != GgufType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not an array of strings"));
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const auto& s : v->array) out.push_back(std::get<std::string>(s));
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  std::vector<int64_t> out;
  if (v->type == GgufType::kArray) {
    out.reserve(v->array.size());
    for (const auto& s : v->array) {
      auto i = AsInt(s);
      if (!i) break;
      out.push_back(*i);
    }
    if (out.size() == v->array.size()) return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not an array of integers"));
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(const std::string& key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(key));
  std::vector<float> out;
  if (v->type == GgufType::kArray) {
    out.reserve(v->array.size());
    for (const auto& s : v->array) {
      auto f = AsFloat(s);
      if (!f) break;
      out.push_back(static_cast<float>(*f));
    }
    if (out.size() == v->array.size()) return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is not an array of numbers"));
}

const TensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kvfleet::model
