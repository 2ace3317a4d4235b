#include "model/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (k.Equals(key)) return &v;
  }
  return nullptr;
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (k.Equals(key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.text_ = Text::Literal(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::String(Text t) {
  Value v;
  v.kind_ = Kind::kString;
  v.text_ = std::move(t);
  return v;
}

Value Value::List(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>(
      ListData{std::move(items), is_tuple, is_tuple ? SeqKind::kTuple : SeqKind::kList, "", ""});
  return v;
}

Value Value::Sequence(std::vector<Value> items, SeqKind kind, std::string type_name, std::string repr) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>(ListData{std::move(items), false, kind, std::move(type_name), std::move(repr)});
  return v;
}

Value Value::Markup(Text t) {
  Value v = String(std::move(t));
  v.bool_ = true;
  return v;
}

Value Value::Dict(DictData dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<DictData>(std::move(dict));
  return v;
}

Value Value::Function(std::string name, NativeFunction call, DictData attributes) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<FunctionData>(FunctionData{std::move(name), std::move(call), std::move(attributes)});
  return v;
}

Value Value::Namespace(DictData dict) {
  Value v = Dict(std::move(dict));
  v.kind_ = Kind::kNamespace;
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !text_.empty();
    case Kind::kList:
      return list_->kind == SeqKind::kGenerator || !list_->items.empty();
    case Kind::kDict:
      return !dict_->entries.empty();
    case Kind::kFunction:
    case Kind::kNamespace:
      return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: positional when the
  // decimal exponent is in [-4, 16), scientific otherwise.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, end);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -5 + 1 && exponent < 16) {
    int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(-point, '0') + digits;
    } else if (point >= static_cast<int>(digits.size())) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string StringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    size_t start = pos;
    char32_t c = DecodeCodePoint(s, &pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (IsPythonPrintable(c)) {
      out.append(s.substr(start, pos - start));
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

Text Value::ToText() const {
  switch (kind_) {
    case Kind::kUndefined:
      return Text();
    case Kind::kString:
      return text_;
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace: {
      // Python's str() of a container is its repr(); input inside it stays input.
      bool from_input = false;
      std::string repr = Repr();
      int depth = 0;
      auto visit = [&](const auto& self, const Value& v) -> void {
        if (++depth > 64) {  // deep or self-containing: assume input (safe)
          from_input = true;
          --depth;
          return;
        }
        if (v.kind_ == Kind::kString) from_input |= v.text_.HasInput();
        if (v.kind_ == Kind::kList) {
          for (const Value& item : v.list_->items) self(self, item);
        }
        if (v.kind_ == Kind::kDict || v.kind_ == Kind::kNamespace) {
          for (const auto& [k, item] : v.dict_->entries) {
            self(self, k);
            self(self, item);
          }
        }
        --depth;
      };
      visit(visit, *this);
      return Text::Derived(std::move(repr), from_input);
    }
    default:
      return Text::Literal(Repr());
  }
}

std::string Value::Repr() const {
  std::vector<const DictData*> open;
  return Repr(&open);
}

std::string Value::Repr(std::vector<const DictData*>* open) const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FloatRepr(float_);
    case Kind::kString:
      return StringRepr(text_.str());
    case Kind::kList: {
      const auto& items = list_->items;
      if (list_->kind == SeqKind::kGenerator) return absl::StrCat("<", list_->type_name, " object>");
      if (list_->kind == SeqKind::kRange) return list_->repr;
      if (list_->kind == SeqKind::kView) {
        std::string out = list_->type_name + "([";
        for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&out, i > 0 ? ", " : "", items[i].Repr(open));
        return out + "])";
      }
      std::string out = list_->is_tuple ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += items[i].Repr(open);
      }
      if (list_->is_tuple && items.size() == 1) out += ",";
      return out + (list_->is_tuple ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      // A namespace can hold itself; Python prints the inner one as {...}.
      if (std::find(open->begin(), open->end(), dict_.get()) != open->end()) return "{...}";
      open->push_back(dict_.get());
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, k.Repr(open), ": ", v.Repr(open));
      }
      open->pop_back();
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kFunction:
      return absl::StrCat("<function ", function_->name, ">");
  }
  return "";
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kFloat || other.kind_ == Kind::kFloat) return number_value() == other.number_value();
    return int_value() == other.int_value();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return str() == other.str();
    case Kind::kList: {
      if (list_->kind != other.list_->kind || list_->type_name != other.list_->type_name) return false;
      if (list_->kind == SeqKind::kGenerator) return list_ == other.list_;
      const auto& a = list_->items;
      const auto& b = other.list_->items;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].Equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->entries.size() != other.dict_->entries.size()) return false;
      for (const auto& [k, v] : dict_->entries) {
        const Value* found = other.dict_->Find(k);
        if (found == nullptr || !found->Equals(v)) return false;
      }
      return true;
    }
    default:
      return dict_ == other.dict_ && function_ == other.function_;
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      if (!list_->type_name.empty()) return list_->type_name;
      return list_->is_tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kFunction:
      return "function";
    case Kind::kNamespace:
      return "Namespace";
  }
  return "object";
}

absl::StatusOr<bool> LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.number_value() < b.number_value();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order is code point order
  if (a.is_plain_list() && b.is_plain_list() && a.list().is_tuple == b.list().is_tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].Equals(y[i])) continue;
      return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '",
                                                 b.TypeName(), "'"));
}

}  // namespace kvfleet::jinja
