// Hugging Face's tojson filter: Python's json.dumps with ensure_ascii=False,
// so non-ASCII text stays as written, floats print as repr() does, and keys
// keep their insertion order unless sort_keys.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {
namespace {

struct JsonStyle {
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator;
  std::string key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (ensure_ascii && static_cast<unsigned char>(c) >= 0x80) {
      size_t pos = i;
      char32_t cp = DecodeCodePoint(s, &pos);
      i = pos - 1;
      auto append_unit = [&](unsigned unit) {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "\\u%04x", unit);
        *out += buf;
      };
      if (cp >= 0x10000) {  // a surrogate pair, as Python writes it
        append_unit(0xD800 + ((cp - 0x10000) >> 10));
        append_unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_unit(cp);
      }
      continue;
    }
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string FloatJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

absl::StatusOr<std::string> KeyString(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.str();
    case Value::Kind::kBool:
      return std::string(k.bool_value() ? "true" : "false");
    case Value::Kind::kInt:
      return std::to_string(k.int_value());
    case Value::Kind::kFloat:
      return FloatJson(k.number_value());
    case Value::Kind::kNone:
      return std::string("null");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("TypeError: keys must be str, int, float, bool or None, not ", k.TypeName()));
  }
}

absl::Status Dump(const Value& v, const JsonStyle& style, int depth, std::string* out, bool* from_input) {
  if (depth > 256) return absl::InvalidArgumentError("ValueError: Circular reference detected");
  auto newline = [&](int level) {
    if (!style.indent.has_value()) return;
    out->push_back('\n');
    for (int i = 0; i < level; ++i) *out += *style.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.bool_value() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      *out += std::to_string(v.int_value());
      return absl::OkStatus();
    case Value::Kind::kFloat:
      *out += FloatJson(v.number_value());
      return absl::OkStatus();
    case Value::Kind::kString:
      *from_input |= v.text().HasInput();
      AppendJsonString(v.str(), style.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kList: {
      const auto& items = v.list().items;
      if (!v.list().is_list_or_tuple()) {
        return absl::InvalidArgumentError(
            absl::StrCat("TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
      }
      if (items.empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += style.item_separator;
        newline(depth + 1);
        RETURN_IF_ERROR(Dump(items[i], style, depth + 1, out, from_input));
      }
      newline(depth);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, item] : v.dict().entries) {
        if (k.is_string()) *from_input |= k.text().HasInput();
        ASSIGN_OR_RETURN(std::string key, KeyString(k));
        entries.emplace_back(std::move(key), &item);
      }
      if (style.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (entries.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      out->push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += style.item_separator;
        newline(depth + 1);
        AppendJsonString(entries[i].first, style.ensure_ascii, out);
        *out += style.key_separator;
        RETURN_IF_ERROR(Dump(*entries[i].second, style, depth + 1, out, from_input));
      }
      newline(depth);
      out->push_back('}');
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

}  // namespace

absl::StatusOr<Value> ToJson(const Value& v, const Value& indent, const Value& separators, bool sort_keys,
                             bool ensure_ascii) {
  JsonStyle style;
  style.sort_keys = sort_keys;
  style.ensure_ascii = ensure_ascii;
  if (indent.is_integer() && indent.int_value() > 4096) {
    return absl::InvalidArgumentError("tojson indent above 4096 spaces");
  }
  if (indent.is_integer()) {
    style.indent = std::string(std::max<int64_t>(indent.int_value(), 0), ' ');
  } else if (indent.is_string()) {
    style.indent = indent.str();
  } else if (!indent.is_none() && !indent.is_undefined()) {
    return absl::InvalidArgumentError(absl::StrCat("TypeError: tojson indent must be an int or a str, not ", indent.TypeName()));
  }
  style.item_separator = style.indent.has_value() ? "," : ", ";
  style.key_separator = ": ";
  if (separators.is_list()) {
    const auto& parts = separators.list().items;
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      return absl::InvalidArgumentError("ValueError: tojson separators must be a pair of strings");
    }
    style.item_separator = parts[0].str();
    style.key_separator = parts[1].str();
  }
  std::string out;
  bool from_input = false;
  RETURN_IF_ERROR(Dump(v, style, 0, &out, &from_input));
  return Value::String(Text::Derived(std::move(out), from_input));
}

}  // namespace kvfleet::jinja
