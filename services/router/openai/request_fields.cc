#include "services/router/openai/request_fields.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::router::openai {

absl::Status Bad(const std::string& param, const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

absl::Status WrongType(const std::string& param, const char* wanted, const Json& got) {
  return Bad(param, absl::StrCat("`", param, "` must be ", wanted, ", not ", got.type_name()));
}

// The field, or nullptr when absent or null (OpenAI treats null as unset).
const Json* Field(const Json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<double>> Number(const Json& object, const char* name) {
  const Json* v = Field(object, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return WrongType(name, "a number", *v);
  return v->get<double>();
}

absl::StatusOr<std::optional<int64_t>> Integer(const Json& object, const char* name) {
  const Json* v = Field(object, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return WrongType(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Bad(name, absl::StrCat("`", name, "` is too large"));
  }
  return v->get<int64_t>();
}

absl::StatusOr<std::optional<bool>> Bool(const Json& object, const char* name) {
  const Json* v = Field(object, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return WrongType(name, "true or false", *v);
  return v->get<bool>();
}

absl::StatusOr<std::optional<std::string>> String(const Json& object, const char* name) {
  const Json* v = Field(object, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return WrongType(name, "a string", *v);
  return v->get<std::string>();
}

// An int32 field within [min, max].
absl::StatusOr<std::optional<int32_t>> Bounded(const Json& object, const char* name, int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(std::optional<int64_t> v, Integer(object, name));
  if (!v.has_value()) return std::nullopt;
  if (*v < min || *v > max) {
    return Bad(name, absl::StrCat("`", name, "` is ", *v, "; it must be in [", min, ", ", max, "]"));
  }
  return static_cast<int32_t>(*v);
}

// A token id: an integer in int32's range (the vocabulary check comes later).
absl::StatusOr<int32_t> TokenId(const Json& v, const std::string& param) {
  const bool in_range = v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() <= INT32_MAX
                                                                         : v.get<int64_t>() >= INT32_MIN &&
                                                                               v.get<int64_t>() <= INT32_MAX);
  if (!in_range) return WrongType(param, "a token id", v);
  return v.get<int32_t>();
}

}  // namespace kvfleet::router::openai
