// Writes GGUF v3 files: metadata and tensors, data aligned to 32 bytes.
// Used by the tiny-model generator and by tests that build (or corrupt)
// model files on purpose.
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

  // shape in GGUF order (shape[0] contiguous); data must hold exactly the
  // bytes of that shape in that type.
  void AddTensor(const std::string& name, std::vector<int64_t> shape, DType dtype, std::vector<uint8_t> data);

  // The whole file as bytes (tests corrupt them) or written to disk.
  std::vector<uint8_t> Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> metadata_;  // serialized key/value entries
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace kvfleet::model
