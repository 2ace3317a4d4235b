// Reader for one .safetensors file: an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and [begin, end) byte
// range in the data that follows, then the data.
//
// Every range is checked while parsing (inside the data, no two tensors
// overlapping, bytes = elements × element size), so a truncated or forged
// file fails with a status naming the file, the tensor and the reason —
// never a read outside the mapping. Tensor data is not copied: the views
// point into the file's mapping, valid while the SafetensorsFile lives.
// Float32, float16 and bfloat16 tensors are supported; any other dtype (an
// integer, FP8, a GPTQ/AWQ packed weight) is refused naming the tensor.
//
// Thread-safety: immutable after Open.
//
//   ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open("model-00001-of-00002.safetensors"));
//   for (const TensorView& t : f->tensors()) ...
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/source/mapped_file.h"
#include "model/source/tensor_view.h"

namespace kvfleet::model {

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return mapping_.path(); }
  int64_t file_size() const { return static_cast<int64_t>(mapping_.bytes().size()); }
  // In the order of their data.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The header's "__metadata__" string entries (others are ignored).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  void DropPages(const void* data, size_t size) const { mapping_.DropPages(data, size); }

 private:
  explicit SafetensorsFile(MappedFile mapping) : mapping_(std::move(mapping)) {}
  absl::Status Parse();

  MappedFile mapping_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The bytes of a safetensors file holding `tensors` (name, dtype, row-major
// shape, data), in the given order, with an optional "__metadata__" map.
// For the tools that write checkpoints, and for tests that forge files.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;  // F32, F16 or BF16
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
// `metadata` is added to "__metadata__" beside "format": "pt".
std::vector<uint8_t> SerializeSafetensors(const std::vector<SafetensorsEntry>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

}  // namespace kvfleet::model
