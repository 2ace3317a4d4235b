// Writes GGUF v3 files: metadata and tensors, data aligned to 32 bytes.
// Used by the tiny-model generator, the draft-model tool (which copies a
// GgufFile's metadata with SetValue and its tensors with AddTensorView) and
// by tests that build (or corrupt) model files on purpose.
//
// Keys are written in the order they are set and are not deduplicated: set
// each key once.
//
// Thread-safety: none; one thread builds and writes a writer.
//
//   GgufWriter w;
//   w.SetString("general.architecture", "llama");
//   w.AddTensor("token_embd.weight", {64, 300}, DType::kQ8_0, bytes);
//   RETURN_IF_ERROR(w.WriteFile("tiny.gguf"));
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "model/gguf/gguf_file.h"

namespace kvfleet::model {

class GgufWriter {
 public:
  void SetString(const std::string& key, const std::string& value);
  void SetUint32(const std::string& key, uint32_t value);
  void SetInt32(const std::string& key, int32_t value);
  void SetFloat32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& values);
  void SetFloat32Array(const std::string& key, const std::vector<float>& values);
  // Any value as GgufFile reads it, written with its own type (uint8 to
  // float64, strings, arrays of any of them), so copying a file's metadata
  // keeps every key's type. The scalar (or each array element) must hold the
  // alternative GgufFile uses for that type; anything else is a bug (CHECK).
  void SetValue(const std::string& key, const GgufValue& value);

  // shape in GGUF order (shape[0] contiguous); data must hold exactly the
  // bytes of that shape in that type.
  void AddTensor(const std::string& name, std::vector<int64_t> shape, DType dtype, std::vector<uint8_t> data);
  // The same without a copy: data is borrowed and must stay valid until the
  // last Serialize or WriteFile (e.g. a TensorInfo::data of a live GgufFile).
  void AddTensorView(const std::string& name, std::vector<int64_t> shape, DType dtype,
                     std::span<const uint8_t> data);

  // The whole file as bytes (tests corrupt them) or written to disk. WriteFile
  // streams the tensors: it holds no second copy of them.
  std::vector<uint8_t> Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<uint8_t> owned;     // AddTensor's copy
    std::span<const uint8_t> view;  // AddTensorView's borrowed bytes
    bool is_view = false;

    std::span<const uint8_t> bytes() const { return is_view ? view : std::span<const uint8_t>(owned); }
  };

  // Calls sink(const uint8_t*, size_t) with the file's bytes in order.
  template <typename Sink>
  void Emit(Sink&& sink) const;

  std::vector<uint8_t> metadata_;  // serialized key/value entries
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace kvfleet::model
