#include "model/gguf/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "model/gguf/gguf_file.h"

namespace kvfleet::model {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void PutKey(std::vector<uint8_t>& out, const std::string& key, GgufType type) {
  PutString(out, key);
  Put<uint32_t>(out, static_cast<uint32_t>(type));
}

// The scalar alternatives GgufFile reads each type into (see ReadScalar);
// another alternative is a caller's bug.
template <typename T>
const T& As(const GgufScalar& v, GgufType type) {
  const T* p = std::get_if<T>(&v);
  CHECK(p != nullptr) << "GGUF value of type " << static_cast<uint32_t>(type) << " holds the wrong alternative";
  return *p;
}

void PutScalar(std::vector<uint8_t>& out, GgufType type, const GgufScalar& v) {
  switch (type) {
    case GgufType::kUint8: Put(out, static_cast<uint8_t>(As<uint64_t>(v, type))); return;
    case GgufType::kInt8: Put(out, static_cast<int8_t>(As<int64_t>(v, type))); return;
    case GgufType::kUint16: Put(out, static_cast<uint16_t>(As<uint64_t>(v, type))); return;
    case GgufType::kInt16: Put(out, static_cast<int16_t>(As<int64_t>(v, type))); return;
    case GgufType::kUint32: Put(out, static_cast<uint32_t>(As<uint64_t>(v, type))); return;
    case GgufType::kInt32: Put(out, static_cast<int32_t>(As<int64_t>(v, type))); return;
    case GgufType::kUint64: Put(out, As<uint64_t>(v, type)); return;
    case GgufType::kInt64: Put(out, As<int64_t>(v, type)); return;
    case GgufType::kFloat32: Put(out, static_cast<float>(As<double>(v, type))); return;
    case GgufType::kFloat64: Put(out, As<double>(v, type)); return;
    case GgufType::kBool: Put<uint8_t>(out, As<bool>(v, type) ? 1 : 0); return;
    case GgufType::kString: PutString(out, As<std::string>(v, type)); return;
    case GgufType::kArray: break;
  }
  CHECK(false) << "GGUF value type " << static_cast<uint32_t>(type) << " is not a scalar type";
}

}  // namespace

void GgufWriter::SetString(const std::string& key, const std::string& value) {
  PutKey(metadata_, key, GgufType::kString);
  PutString(metadata_, value);
  ++metadata_count_;
}

void GgufWriter::SetUint32(const std::string& key, uint32_t value) {
  PutKey(metadata_, key, GgufType::kUint32);
  Put(metadata_, value);
  ++metadata_count_;
}

void GgufWriter::SetInt32(const std::string& key, int32_t value) {
  PutKey(metadata_, key, GgufType::kInt32);
  Put(metadata_, value);
  ++metadata_count_;
}

void GgufWriter::SetFloat32(const std::string& key, float value) {
  PutKey(metadata_, key, GgufType::kFloat32);
  Put(metadata_, value);
  ++metadata_count_;
}

void GgufWriter::SetBool(const std::string& key, bool value) {
  PutKey(metadata_, key, GgufType::kBool);
  Put<uint8_t>(metadata_, value ? 1 : 0);
  ++metadata_count_;
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  PutKey(metadata_, key, GgufType::kArray);
  Put<uint32_t>(metadata_, static_cast<uint32_t>(GgufType::kString));
  Put<uint64_t>(metadata_, values.size());
  for (const auto& v : values) PutString(metadata_, v);
  ++metadata_count_;
}

void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  PutKey(metadata_, key, GgufType::kArray);
  Put<uint32_t>(metadata_, static_cast<uint32_t>(GgufType::kInt32));
  Put<uint64_t>(metadata_, values.size());
  for (int32_t v : values) Put(metadata_, v);
  ++metadata_count_;
}

void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& values) {
  PutKey(metadata_, key, GgufType::kArray);
  Put<uint32_t>(metadata_, static_cast<uint32_t>(GgufType::kFloat32));
  Put<uint64_t>(metadata_, values.size());
  for (float v : values) Put(metadata_, v);
  ++metadata_count_;
}

void GgufWriter::SetValue(const std::string& key, const GgufValue& value) {
  PutKey(metadata_, key, value.type);
  if (value.type == GgufType::kArray) {
    CHECK(value.element_type != GgufType::kArray) << "metadata '" << key << "': arrays of arrays";
    Put<uint32_t>(metadata_, static_cast<uint32_t>(value.element_type));
    Put<uint64_t>(metadata_, value.array.size());
    for (const GgufScalar& v : value.array) PutScalar(metadata_, value.element_type, v);
  } else {
    PutScalar(metadata_, value.type, value.scalar);
  }
  ++metadata_count_;
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                           std::vector<uint8_t> data) {
  int64_t elems = 1;
  for (int64_t d : shape) elems *= d;
  CHECK_EQ(static_cast<int64_t>(data.size()), RowBytes(dtype, elems)) << "tensor " << name;
  tensors_.push_back({.name = name, .shape = std::move(shape), .dtype = dtype, .owned = std::move(data)});
}

void GgufWriter::AddTensorView(const std::string& name, std::vector<int64_t> shape, DType dtype,
                               std::span<const uint8_t> data) {
  int64_t elems = 1;
  for (int64_t d : shape) elems *= d;
  CHECK_EQ(static_cast<int64_t>(data.size()), RowBytes(dtype, elems)) << "tensor " << name;
  tensors_.push_back({.name = name, .shape = std::move(shape), .dtype = dtype, .view = data, .is_view = true});
}

template <typename Sink>
void GgufWriter::Emit(Sink&& sink) const {
  std::vector<uint8_t> header;
  Put<uint32_t>(header, 0x46554747);  // "GGUF"
  Put<uint32_t>(header, 3);
  Put<uint64_t>(header, tensors_.size());
  Put<uint64_t>(header, metadata_count_);
  header.insert(header.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    PutString(header, t.name);
    Put<uint32_t>(header, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<uint64_t>(header, static_cast<uint64_t>(d));
    Put<uint32_t>(header, Traits(t.dtype).ggml_type);
    Put<uint64_t>(header, offset);
    offsets.push_back(offset);
    offset += (t.bytes().size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  header.resize((header.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  sink(header.data(), header.size());
  // Tensor i starts at offsets[i] of the data section; zeros pad up to it.
  static constexpr uint8_t kZeros[kAlignment] = {};
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    sink(kZeros, offsets[i] - pos);
    const std::span<const uint8_t> bytes = tensors_[i].bytes();
    sink(bytes.data(), bytes.size());
    pos = offsets[i] + bytes.size();
  }
  sink(kZeros, (pos + kAlignment - 1) / kAlignment * kAlignment - pos);
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  Emit([&out](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  Emit([&f](const uint8_t* p, size_t n) {
    if (n > 0) f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  });
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kvfleet::model
