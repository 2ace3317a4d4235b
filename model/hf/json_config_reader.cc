#include "model/hf/json_config_reader.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": not valid JSON (", e.what(), ")"));
  }
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text.str(), path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": the top level is not a JSON object"));
  return j;
}

absl::StatusOr<JsonConfigReader> JsonConfigReader::FromFile(const std::string& path) {
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  return JsonConfigReader(path, std::move(j));
}

const nlohmann::json* JsonConfigReader::Find(std::string_view key) const {
  const nlohmann::json* at = &json_;
  for (absl::string_view part : absl::StrSplit(absl::string_view(key.data(), key.size()), '.')) {
    if (!at->is_object()) return nullptr;
    const auto it = at->find(std::string(part));
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at->is_null() ? nullptr : at;
}

bool JsonConfigReader::Has(std::string_view key) const { return Find(key) != nullptr; }

absl::StatusOr<const nlohmann::json*> JsonConfigReader::Get(std::string_view key, const char* kind) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(origin_, ": '", std::string(key), "' is missing"));
  return v;
}

absl::StatusOr<int64_t> JsonConfigReader::Int(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "integer"));
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return v->get<int64_t>();
  } else if (v->is_number_integer()) {
    return v->get<int64_t>();
  } else if (v->is_number_float()) {
    // Only a whole number that an int64 holds: casting anything else is undefined.
    const double d = v->get<double>();
    if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 0x1p62) return static_cast<int64_t>(d);
  }
  return Invalid(absl::StrCat("'", std::string(key), "' = ", v->dump(), " is not an integer"));
}

absl::StatusOr<double> JsonConfigReader::Float(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "number"));
  if (!v->is_number()) return Invalid(absl::StrCat("'", std::string(key), "' = ", v->dump(), " is not a number"));
  return v->get<double>();
}

absl::StatusOr<std::string> JsonConfigReader::String(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "string"));
  if (!v->is_string()) return Invalid(absl::StrCat("'", std::string(key), "' = ", v->dump(), " is not a string"));
  return v->get<std::string>();
}

absl::StatusOr<bool> JsonConfigReader::Bool(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "bool"));
  if (!v->is_boolean()) return Invalid(absl::StrCat("'", std::string(key), "' = ", v->dump(), " is not true or false"));
  return v->get<bool>();
}

absl::StatusOr<std::vector<std::string>> JsonConfigReader::StringList(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "list"));
  std::vector<std::string> out;
  if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_string()) break;
      out.push_back(e.get<std::string>());
    }
    if (out.size() == v->size()) return out;
  }
  return Invalid(absl::StrCat("'", std::string(key), "' is not a list of strings"));
}

absl::StatusOr<std::vector<int64_t>> JsonConfigReader::IntList(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "list"));
  std::vector<int64_t> out;
  if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_number_integer()) break;
      out.push_back(e.get<int64_t>());
    }
    if (out.size() == v->size()) return out;
  }
  return Invalid(absl::StrCat("'", std::string(key), "' is not a list of integers"));
}

absl::StatusOr<std::vector<float>> JsonConfigReader::FloatList(std::string_view key) const {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Get(key, "list"));
  std::vector<float> out;
  if (v->is_array()) {
    for (const auto& e : *v) {
      // A number a float cannot hold would be undefined to convert.
      if (!e.is_number() || !(std::fabs(e.get<double>()) <= std::numeric_limits<float>::max())) break;
      out.push_back(e.get<float>());
    }
    if (out.size() == v->size()) return out;
  }
  return Invalid(absl::StrCat("'", std::string(key), "' is not a list of numbers"));
}

}  // namespace kvfleet::model
