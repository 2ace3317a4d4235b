// A ConfigWriter into a config.json object: a dotted key
// ("rope_scaling.factor") writes into a nested object, as
// JsonConfigReader reads it. Keys keep the order they are written in.
//
//   nlohmann::ordered_json j = nlohmann::ordered_json::object();
//   JsonConfigWriter w(j);
//   arch.write_config(config, ModelFormat::kHuggingFace, w);
#pragma once

#include <nlohmann/json.hpp>

#include "model/source/config_writer.h"

namespace kvfleet::model {

class JsonConfigWriter final : public ConfigWriter {
 public:
  explicit JsonConfigWriter(nlohmann::ordered_json& object) : object_(object) {}

  void Int(std::string_view key, int64_t value) override { Slot(key) = value; }
  void Float(std::string_view key, double value) override { Slot(key) = value; }
  void Bool(std::string_view key, bool value) override { Slot(key) = value; }
  void String(std::string_view key, std::string_view value) override { Slot(key) = std::string(value); }
  void StringList(std::string_view key, std::span<const std::string> values) override {
    Slot(key) = nlohmann::ordered_json(std::vector<std::string>(values.begin(), values.end()));
  }
  void FloatList(std::string_view key, std::span<const float> values) override {
    Slot(key) = nlohmann::ordered_json(std::vector<float>(values.begin(), values.end()));
  }
  void FloatTensor(std::string_view, std::span<const float>) override {}

 private:
  // The value at a dotted key, its objects made on the way.
  nlohmann::ordered_json& Slot(std::string_view key) {
    nlohmann::ordered_json* at = &object_;
    for (size_t dot; (dot = key.find('.')) != std::string_view::npos; key.remove_prefix(dot + 1)) {
      at = &(*at)[std::string(key.substr(0, dot))];
    }
    return (*at)[std::string(key)];
  }

  nlohmann::ordered_json& object_;
};

}  // namespace kvfleet::model
