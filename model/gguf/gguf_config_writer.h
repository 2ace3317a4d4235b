// A ConfigWriter into GGUF metadata: integers as uint32 and floats as
// float32 (the types llama.cpp writes a decoder's keys in), keys flat.
//
//   GgufWriter file;
//   GgufConfigWriter w(file);
//   arch.write_config(config, ModelFormat::kGguf, w);
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "model/gguf/gguf_writer.h"
#include "model/source/config_writer.h"

namespace kvfleet::model {

class GgufConfigWriter final : public ConfigWriter {
 public:
  explicit GgufConfigWriter(GgufWriter& writer) : writer_(writer) {}

  void Int(std::string_view key, int64_t value) override {
    CHECK(value >= 0 && value <= UINT32_MAX) << key << " = " << value << " does not fit GGUF's uint32";
    writer_.SetUint32(std::string(key), static_cast<uint32_t>(value));
  }
  void Float(std::string_view key, double value) override {
    writer_.SetFloat32(std::string(key), static_cast<float>(value));
  }
  void Bool(std::string_view key, bool value) override { writer_.SetBool(std::string(key), value); }
  void String(std::string_view key, std::string_view value) override {
    writer_.SetString(std::string(key), std::string(value));
  }
  void StringList(std::string_view key, std::span<const std::string> values) override {
    writer_.SetStringArray(std::string(key), std::vector<std::string>(values.begin(), values.end()));
  }
  void FloatList(std::string_view key, std::span<const float> values) override {
    writer_.SetFloat32Array(std::string(key), std::vector<float>(values.begin(), values.end()));
  }
  void FloatTensor(std::string_view name, std::span<const float> values) override {
    std::vector<uint8_t> bytes(values.size_bytes());
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer_.AddTensor(std::string(name), {static_cast<int64_t>(values.size())}, DType::kF32, std::move(bytes));
  }

 private:
  GgufWriter& writer_;
};

}  // namespace kvfleet::model
