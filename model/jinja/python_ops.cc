// Operators, attribute and item access, iteration and %-formatting with
// Python's semantics and Python's errors.
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"
#include "model/jinja/methods.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {
namespace {

absl::Status TypeError(std::string_view what) { return absl::InvalidArgumentError(absl::StrCat("TypeError: ", std::string(what))); }

absl::Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return TypeError(absl::StrCat("unsupported operand type(s) for ", std::string(op), ": '", a.TypeName(), "' and '", b.TypeName(),
                                "'"));
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// Python's index normalization for one item; nullopt when out of range.
std::optional<int64_t> NormalizeIndex(int64_t i, int64_t size) {
  if (i < 0) i += size;
  if (i < 0 || i >= size) return std::nullopt;
  return i;
}

// Lists, tuples and ranges support seq[i]; generators and views do not.
bool IsIndexable(const Value& v) {
  return v.is_list() && (v.list().is_list_or_tuple() || v.list().kind == SeqKind::kRange);
}

constexpr int64_t kMaxRepeatedBytes = 64 << 20;

absl::StatusOr<Value> Repeat(const Value& seq, int64_t times) {
  int64_t unit = seq.is_string() ? static_cast<int64_t>(seq.str().size()) : static_cast<int64_t>(seq.list().items.size()) * 16;
  if (times > 0 && unit > 0 && times > kMaxRepeatedBytes / unit) {
    return absl::InvalidArgumentError("MemoryError: the repeated sequence would exceed 64 MiB");
  }
  if (seq.is_string()) {
    Text out;
    for (int64_t i = 0; i < times; ++i) out.Append(seq.text());
    return Value::String(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
  return Value::List(std::move(items), seq.list().is_tuple);
}

}  // namespace

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat("UndefinedError: ", v.undefined_hint()));
}

std::optional<Value> ArgReader::Get(size_t index, std::string_view name) const {
  if (index < args_.positional.size()) return args_.positional[index];
  for (const auto& [k, v] : args_.keyword) {
    if (k == name) return v;
  }
  return std::nullopt;
}

Value ArgReader::GetOr(size_t index, std::string_view name, Value fallback) const {
  std::optional<Value> v = Get(index, name);
  return v.has_value() ? *v : std::move(fallback);
}

absl::StatusOr<Value> ArgReader::Require(size_t index, std::string_view name) const {
  std::optional<Value> v = Get(index, name);
  if (!v.has_value()) return TypeError(absl::StrCat(std::string(function_), "() missing required argument '", std::string(name), "'"));
  return *v;
}

absl::Status ArgReader::Check(size_t max_positional, std::initializer_list<std::string_view> names) const {
  if (args_.positional.size() > max_positional) {
    return TypeError(absl::StrCat(std::string(function_), "() takes at most ", max_positional, " positional argument(s), ",
                                  args_.positional.size(), " given"));
  }
  for (const auto& [k, v] : args_.keyword) {
    bool known = false;
    for (std::string_view n : names) known |= n == k;
    if (!known) return TypeError(absl::StrCat(std::string(function_), "() got an unexpected keyword argument '", k, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (std::optional<Value> method = BindMethod(obj, name); method.has_value()) return *method;
  if (obj.is_callable()) {
    if (const Value* v = obj.function().attributes.Find(name); v != nullptr) return *v;
  }
  if (obj.is_mapping()) {
    if (const Value* v = obj.dict().Find(name); v != nullptr) return *v;
  }
  return Value::Undefined(absl::StrCat("'", obj.is_mapping() && obj.kind() == Value::Kind::kDict ? "dict object"
                                                                                                  : obj.TypeName() + " object",
                                       "' has no attribute '", std::string(name), "'"));
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_mapping()) {
    if (const Value* v = obj.dict().Find(key); v != nullptr) return *v;
  } else if ((IsIndexable(obj) || obj.is_string()) && key.is_integer()) {
    if (obj.is_list()) {
      auto i = NormalizeIndex(key.int_value(), obj.list().items.size());
      if (i.has_value()) return obj.list().items[*i];
    } else {
      std::vector<size_t> offsets = CodePointOffsets(obj.str());
      auto i = NormalizeIndex(key.int_value(), offsets.size() - 1);
      if (i.has_value()) return Value::String(obj.text().Substr(offsets[*i], offsets[*i + 1] - offsets[*i]));
    }
  }
  if (key.is_string()) return GetAttribute(obj, key.str());
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element ", key.Repr()));
}

absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) return UndefinedError(obj);
  auto as_int = [](const Value& v, std::optional<int64_t>* out) -> absl::Status {
    if (v.is_undefined() || v.is_none()) return absl::OkStatus();
    if (!v.is_integer()) return TypeError("slice indices must be integers or None");
    *out = v.int_value();
    return absl::OkStatus();
  };
  std::optional<int64_t> start, stop, step;
  RETURN_IF_ERROR(as_int(start_v, &start));
  RETURN_IF_ERROR(as_int(stop_v, &stop));
  RETURN_IF_ERROR(as_int(step_v, &step));
  int64_t st = step.value_or(1);
  if (st == 0) return absl::InvalidArgumentError("ValueError: slice step cannot be zero");
  std::vector<size_t> offsets;
  int64_t size;
  if (obj.is_string()) {
    offsets = CodePointOffsets(obj.str());
    size = static_cast<int64_t>(offsets.size()) - 1;
  } else if (IsIndexable(obj)) {
    size = static_cast<int64_t>(obj.list().items.size());
  } else {
    // jinja2 turns the TypeError of slicing a generator or a number into Undefined.
    return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element slice"));
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v.has_value()) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += size;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= size) {
      x = st < 0 ? size - 1 : size;
    }
    return x;
  };
  int64_t lo = adjust(start, st < 0 ? size - 1 : 0);
  int64_t hi = adjust(stop, st < 0 ? -1 : size);
  std::vector<int64_t> picks;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) picks.push_back(i);
  if (obj.is_string()) {
    Text out;
    if (st == 1 && !picks.empty()) return Value::String(obj.text().Substr(offsets[lo], offsets[hi] - offsets[lo]));
    for (int64_t i : picks) out.Append(obj.text().Substr(offsets[i], offsets[i + 1] - offsets[i]));
    return Value::String(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i : picks) items.push_back(obj.list().items[i]);
  return Value::List(std::move(items), obj.list().is_tuple);
}

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    Text t = a.ToText();
    t.Append(b.ToText());
    return Value::String(std::move(t));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  bool ints = a.is_integer() && b.is_integer();
  bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::Int(a.int_value() + b.int_value());
    if (numbers) return Value::Float(a.number_value() + b.number_value());
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the str (and str + Markup), as markupsafe does.
      bool markup = a.is_markup() || b.is_markup();
      Text t = markup && !a.is_markup() ? EscapeHtml(a.text()) : a.text();
      t.Append(markup && !b.is_markup() ? EscapeHtml(b.text()) : b.text());
      return markup ? Value::Markup(std::move(t)) : Value::String(std::move(t));
    }
    if (a.is_plain_list() && b.is_plain_list() && a.list().is_tuple == b.list().is_tuple) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.list().is_tuple);
    }
    if (a.is_string()) return TypeError(absl::StrCat("can only concatenate str (not \"", b.TypeName(), "\") to str"));
    return Unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::Int(a.int_value() - b.int_value());
    if (numbers) return Value::Float(a.number_value() - b.number_value());
    return Unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::Int(a.int_value() * b.int_value());
    if (numbers) return Value::Float(a.number_value() * b.number_value());
    if ((a.is_string() || a.is_list()) && b.is_integer()) return Repeat(a, b.int_value());
    if ((b.is_string() || b.is_list()) && a.is_integer()) return Repeat(b, a.int_value());
    return Unsupported("*", a, b);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return PercentFormat(a, b);
    if (!numbers) return Unsupported(op, a, b);
    if (b.number_value() == 0) {
      return absl::InvalidArgumentError(op == "/" ? "ZeroDivisionError: division by zero"
                                                  : "ZeroDivisionError: integer division or modulo by zero");
    }
    if (op == "/") return Value::Float(a.number_value() / b.number_value());
    if (ints) {
      return Value::Int(op == "//" ? FloorDiv(a.int_value(), b.int_value()) : FloorMod(a.int_value(), b.int_value()));
    }
    double x = a.number_value(), y = b.number_value();
    if (op == "//") return Value::Float(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::Float(m);
  }
  if (op == "**") {
    if (ints && b.int_value() >= 0) {  // by squaring; wraps where Python would grow a big int
      uint64_t result = 1, base = static_cast<uint64_t>(a.int_value());
      for (uint64_t e = static_cast<uint64_t>(b.int_value()); e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return Value::Int(static_cast<int64_t>(result));
    }
    if (numbers) return Value::Float(std::pow(a.number_value(), b.number_value()));
    return Unsupported("** or pow()", a, b);
  }
  return absl::InternalError(absl::StrCat("unknown operator ", std::string(op)));
}

absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string()) {
      return TypeError(absl::StrCat("'in <string>' requires string as left operand, not ", needle.TypeName()));
    }
    return haystack.str().find(needle.str()) != std::string::npos;
  }
  if (haystack.is_mapping()) return haystack.dict().Find(needle) != nullptr;
  if (haystack.is_list()) {
    for (const Value& item : haystack.list().items) {
      if (item.Equals(needle)) return true;
    }
    return false;
  }
  if (haystack.is_undefined()) return false;
  return TypeError(absl::StrCat("argument of type '", haystack.TypeName(), "' is not iterable"));
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>{};
    case Value::Kind::kList:
      return v.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, item] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      std::vector<size_t> offsets = CodePointOffsets(v.str());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(Value::String(v.text().Substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return chars;
    }
    default:
      return TypeError(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.str()));
    case Value::Kind::kList:
      if (v.list().kind == SeqKind::kGenerator) break;
      return static_cast<int64_t>(v.list().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().entries.size());
    default:
      break;
  }
  return TypeError(absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> PercentFormat(const Value& format, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.list().is_tuple) {
    values = args.list().items;
  } else {
    values.push_back(args);
  }
  const std::string& f = format.str();
  Text out;
  bool from_input = format.text().HasInput();
  std::string plain;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      plain.push_back(f[i]);
      continue;
    }
    size_t spec_start = i++;
    const Value* named = nullptr;
    if (i < f.size() && f[i] == '(' && args.is_mapping()) {
      size_t close = f.find(')', i);
      if (close == std::string::npos) return absl::InvalidArgumentError("ValueError: incomplete format key");
      named = args.dict().Find(std::string_view(f).substr(i + 1, close - i - 1));
      if (named == nullptr) return absl::InvalidArgumentError(absl::StrCat("KeyError: '", f.substr(i + 1, close - i - 1), "'"));
      i = close + 1;
      spec_start = i - 1;
    }
    while (i < f.size() && std::string_view("-+ #0123456789.").find(f[i]) != std::string_view::npos) ++i;
    if (i >= f.size()) return absl::InvalidArgumentError("ValueError: incomplete format");
    char conv = f[i];
    if (conv == '%') {
      plain.push_back('%');
      continue;
    }
    if (named == nullptr && next >= values.size()) return TypeError("not enough arguments for format string");
    const Value& v = named != nullptr ? *named : values[next++];
    std::string flags = "%" + f.substr(spec_start + 1, i - spec_start - 1);  // "%-5.2"
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? v.ToText().str() : v.Repr();
      if (v.is_string()) from_input |= v.text().HasInput();
      std::snprintf(buf, sizeof(buf), (flags + "s").c_str(), s.c_str());
      plain += s.size() < 400 ? std::string(buf) : s;
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number()) return TypeError(absl::StrCat("%", std::string(1, conv), " format: a real number is required, not ", v.TypeName()));
      int64_t n = v.is_integer() ? v.int_value() : static_cast<int64_t>(v.number_value());
      std::snprintf(buf, sizeof(buf), (flags + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), static_cast<long long>(n));
      plain += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!v.is_number()) return TypeError(absl::StrCat("must be real number, not ", v.TypeName()));
      std::snprintf(buf, sizeof(buf), (flags + conv).c_str(), v.number_value());
      plain += buf;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("ValueError: unsupported format character '", std::string(1, conv), "'"));
    }
  }
  if (!args.is_mapping() && next < values.size()) {
    return TypeError("not all arguments converted during string formatting");
  }
  return Value::String(Text::Derived(std::move(plain), from_input));
}

}  // namespace kvfleet::jinja
