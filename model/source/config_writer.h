// Writing a model's hyperparameters in a file format's own keys: the
// inverse of ConfigReader, through which an architecture writes its config
// (the tiny models' GGUF metadata, a checkpoint export's config.json)
// without naming a format library. A dotted key ("rope_scaling.factor")
// is a nested object in config.json and a flat key in GGUF metadata, as
// ConfigReader reads them.
//
//   writer.Int("num_hidden_layers", c.num_layers);
//   writer.String("rope_scaling.rope_type", "linear");
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvfleet::model {

class ConfigWriter {
 public:
  virtual ~ConfigWriter() = default;
  virtual void Int(std::string_view key, int64_t value) = 0;
  virtual void Float(std::string_view key, double value) = 0;
  virtual void Bool(std::string_view key, bool value) = 0;
  virtual void String(std::string_view key, std::string_view value) = 0;
  virtual void StringList(std::string_view key, std::span<const std::string> values) = 0;
  virtual void FloatList(std::string_view key, std::span<const float> values) = 0;
  // A vector a format keeps as a float32 tensor beside the weights (GGUF's
  // rope_freqs.weight, rope_factors_long.weight). config.json keeps none:
  // a checkpoint states what the vector came from in its own keys, so its
  // writer drops it.
  virtual void FloatTensor(std::string_view name, std::span<const float> values) = 0;
};

}  // namespace kvfleet::model
