#include "services/worker/grammar/json_schema_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::worker {
namespace {

using Json = nlohmann::ordered_json;  // a schema keeps its properties in order

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("the JSON schema's ", path, " ", what));
}

// Keywords whose meaning constrained decoding cannot enforce: refused, not ignored.
constexpr const char* kUnsupported[] = {"not",          "if",          "then",          "else",
                                        "dependentSchemas", "dependentRequired", "patternProperties",
                                        "propertyNames", "contains",    "unevaluatedProperties",
                                        "unevaluatedItems"};

absl::Status Check(const Json& s, const std::string& path, int depth) {
  if (depth > 64) return Bad(path, "nests deeper than 64 levels");
  if (s.is_boolean()) return absl::OkStatus();
  if (!s.is_object()) return Bad(path, absl::StrCat("must be an object (a schema), not ", s.type_name()));
  for (const char* k : kUnsupported) {
    if (s.contains(k)) return Bad(absl::StrCat(path, ".", k), "is not supported by constrained decoding");
  }
  if (auto t = s.find("type"); t != s.end()) {
    static const char* kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    auto known = [&](const Json& v) {
      if (!v.is_string()) return false;
      for (const char* k : kTypes) {
        if (v == k) return true;
      }
      return false;
    };
    const bool ok = t->is_array() ? !t->empty() && std::all_of(t->begin(), t->end(), known) : known(*t);
    if (!ok) return Bad(path + ".type", absl::StrCat("is ", t->dump(), "; it must be one of object, array, string, "
                                                     "number, integer, boolean, null (or a list of them)"));
  }
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
    if (auto v = s.find(k); v != s.end() && !v->is_number()) return Bad(absl::StrCat(path, ".", k), "must be a number");
  }
  for (const char* k : {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}) {
    if (auto v = s.find(k); v != s.end() && !(v->is_number_unsigned() || (v->is_number_integer() && *v >= 0))) {
      return Bad(absl::StrCat(path, ".", k), "must be a non-negative integer");
    }
  }
  if (auto v = s.find("pattern"); v != s.end() && !v->is_string()) return Bad(path + ".pattern", "must be a string");
  if (auto v = s.find("enum"); v != s.end() && !(v->is_array() && !v->empty())) {
    return Bad(path + ".enum", "must be a non-empty list");
  }
  if (auto v = s.find("required"); v != s.end()) {
    if (!v->is_array()) return Bad(path + ".required", "must be a list of property names");
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return Bad(absl::StrCat(path, ".required[", i, "]"), "must be a string");
    }
  }
  if (auto v = s.find("$ref"); v != s.end()) {
    if (!v->is_string() || v->get<std::string>().rfind("#", 0) != 0) {
      return Bad(path + ".$ref", "must refer inside the schema (\"#/$defs/...\"); remote references are not fetched");
    }
  }
  if (auto v = s.find("properties"); v != s.end()) {
    if (!v->is_object()) return Bad(path + ".properties", "must be an object of schemas");
    for (const auto& [name, sub] : v->items()) RETURN_IF_ERROR(Check(sub, absl::StrCat(path, ".properties.", name), depth + 1));
  }
  for (const char* k : {"$defs", "definitions"}) {
    if (auto v = s.find(k); v != s.end()) {
      if (!v->is_object()) return Bad(absl::StrCat(path, ".", k), "must be an object of schemas");
      for (const auto& [name, sub] : v->items()) {
        RETURN_IF_ERROR(Check(sub, absl::StrCat(path, ".", k, ".", name), depth + 1));
      }
    }
  }
  for (const char* k : {"items", "additionalProperties"}) {
    if (auto v = s.find(k); v != s.end()) RETURN_IF_ERROR(Check(*v, absl::StrCat(path, ".", k), depth + 1));
  }
  for (const char* k : {"anyOf", "oneOf", "allOf", "prefixItems"}) {
    if (auto v = s.find(k); v != s.end()) {
      if (!v->is_array() || v->empty()) return Bad(absl::StrCat(path, ".", k), "must be a non-empty list of schemas");
      for (size_t i = 0; i < v->size(); ++i) {
        RETURN_IF_ERROR(Check((*v)[i], absl::StrCat(path, ".", k, "[", i, "]"), depth + 1));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonSchema(const Json& schema) { return Check(schema, "$", 0); }

}  // namespace kvfleet::worker
