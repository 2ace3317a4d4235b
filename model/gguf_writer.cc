#include "model/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "model/gguf_file.h"

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

uint32_t GgmlCode(DType t) {
  switch (t) {
    case DType::kF32: return static_cast<uint32_t>(GgmlTypeCode::kF32);
    case DType::kF16: return static_cast<uint32_t>(GgmlTypeCode::kF16);
    case DType::kBF16: return static_cast<uint32_t>(GgmlTypeCode::kBF16);
    case DType::kQ8_0: return static_cast<uint32_t>(GgmlTypeCode::kQ8_0);
    case DType::kQ4_0: return static_cast<uint32_t>(GgmlTypeCode::kQ4_0);
    case DType::kQ4_1: return static_cast<uint32_t>(GgmlTypeCode::kQ4_1);
  }
  return 0;
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

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                           std::vector<uint8_t> data) {
  int64_t elems = 1;
  for (int64_t d : shape) elems *= d;
  CHECK_EQ(static_cast<int64_t>(data.size()), RowBytes(dtype, elems)) << "tensor " << name;
  tensors_.push_back({name, std::move(shape), dtype, std::move(data)});
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, 0x46554747);  // "GGUF"
  Put<uint32_t>(out, 3);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, metadata_count_);
  out.insert(out.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<uint64_t>(out, static_cast<uint64_t>(d));
    Put<uint32_t>(out, GgmlCode(t.dtype));
    Put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i], 0);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kvfleet::model
