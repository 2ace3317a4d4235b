// Reader for GGUF model files (versions 2 and 3).
//
// Owns a read-only mmap of the file, the parsed metadata and the tensor
// directory. Every offset and length is checked against the file size while
// parsing, so a truncated or corrupt file yields a status naming the file,
// the key or tensor, and the reason — never a read outside the mapping.
// Tensor data is not copied: TensorInfo::data points into the mapping and
// stays valid as long as the GgufFile lives.
//
// Thread-safety: immutable after Open; safe to share for reading.
//
//   ASSIGN_OR_RETURN(auto file, GgufFile::Open("SmolLM2.gguf"));
//   ASSIGN_OR_RETURN(std::string arch, file->GetString("general.architecture"));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "model/source/mapped_file.h"

namespace kvfleet::model {

// GGUF metadata value types, with the numbering of the file format.
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// ggml's name of a tensor type code ("Q5_K", "IQ4_XS", ...), for messages;
// "type <code>" for one ggml does not define.
std::string GgmlTypeName(uint32_t code);

using GgufScalar = std::variant<int64_t, uint64_t, double, bool, std::string>;

struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType element_type = GgufType::kUint8;  // for arrays
  GgufScalar scalar;                         // for non-arrays
  std::vector<GgufScalar> array;             // for arrays
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the contiguous dimension
  DType dtype = DType::kF32;
  uint64_t offset = 0;         // from the start of the data section
  int64_t num_elements = 0;
  int64_t num_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  const std::string& path() const { return mapping_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  int64_t file_size() const { return static_cast<int64_t>(mapping_.bytes().size()); }
  // MappedFile::DropPages over this file's mapping (tensor data a backend
  // has copied into its own layout).
  void DropPages(const void* data, size_t size) const { mapping_.DropPages(data, size); }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  bool Has(const std::string& key) const { return metadata_.count(key) > 0; }
  // Typed getters: NotFound if absent, InvalidArgument if of another type.
  // Integer getters accept any integer type whose value fits.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;  // also accepts integers
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(const std::string& key) const;

  // nullptr when absent.
  const TensorInfo* FindTensor(const std::string& name) const;

 private:
  explicit GgufFile(MappedFile mapping) : mapping_(std::move(mapping)) {}
  absl::Status Parse();
  absl::StatusOr<const GgufValue*> Lookup(const std::string& key) const;

  MappedFile mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace kvfleet::model
