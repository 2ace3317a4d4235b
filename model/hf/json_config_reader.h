// A Hugging Face config.json (or any JSON object) behind the ConfigReader
// interface (model/source/config_reader.h). A dotted key walks nested
// objects ("rope_scaling.factor"); an explicit null counts as absent.
//
//   ASSIGN_OR_RETURN(JsonConfigReader r, JsonConfigReader::FromFile("ckpt/config.json"));
//   ASSIGN_OR_RETURN(int64_t layers, r.PositiveInt("num_hidden_layers"));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/source/config_reader.h"
#include "nlohmann/json.hpp"

namespace kvfleet::model {

// Untrusted JSON text: InvalidArgument naming `origin` and where the parser
// stopped. Never throws (nlohmann's parser throws out_of_range for a number
// no double holds, 1e400, even when asked not to throw).
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view origin);

// The JSON object of a file: NotFound when it does not exist, InvalidArgument
// naming the file (and where the parser stopped) when it is not a JSON object.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

class JsonConfigReader : public ConfigReader {
 public:
  static absl::StatusOr<JsonConfigReader> FromFile(const std::string& path);
  JsonConfigReader(std::string origin, nlohmann::json json) : origin_(std::move(origin)), json_(std::move(json)) {}

  const std::string& origin() const override { return origin_; }
  const nlohmann::json& json() const { return json_; }
  bool Has(std::string_view key) const override;
  absl::StatusOr<int64_t> Int(std::string_view key) const override;
  absl::StatusOr<double> Float(std::string_view key) const override;
  absl::StatusOr<std::string> String(std::string_view key) const override;
  absl::StatusOr<bool> Bool(std::string_view key) const override;
  absl::StatusOr<std::vector<std::string>> StringList(std::string_view key) const override;
  absl::StatusOr<std::vector<int64_t>> IntList(std::string_view key) const override;
  absl::StatusOr<std::vector<float>> FloatList(std::string_view key) const override;

 private:
  // The value at a dotted key, or null when absent.
  const nlohmann::json* Find(std::string_view key) const;
  absl::StatusOr<const nlohmann::json*> Get(std::string_view key, const char* kind) const;

  std::string origin_;
  nlohmann::json json_;
};

}  // namespace kvfleet::model
