#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/filters.h"
#include "model/jinja/methods.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {
namespace {

constexpr int64_t kMaxPadding = 64 << 20;

Value Derived(std::string s, const Value& from) {
  return Value::String(Text::Derived(std::move(s), from.is_string() && from.text().HasInput()));
}

absl::StatusOr<Value> Trim(Evaluator&, const Value& in, const ArgReader& a) {
  std::optional<Value> chars = a.Get(0, "chars");
  Text t = in.ToText();
  return Value::String(StripText(t, chars.has_value() && chars->is_string() ? std::optional<std::string>(chars->str()) : std::nullopt, true, true));
}

absl::StatusOr<Value> Upper(Evaluator&, const Value& in, const ArgReader&) { return Derived(PythonUpper(in.ToText().str()), in); }
absl::StatusOr<Value> Lower(Evaluator&, const Value& in, const ArgReader&) { return Derived(PythonLower(in.ToText().str()), in); }
// jinja2's title: words begin after whitespace, "-" and opening brackets
// (so "it's" stays "It's", unlike str.title()).
absl::StatusOr<Value> Title(Evaluator&, const Value& in, const ArgReader&) {
  std::string s = in.ToText().str();
  std::string out;
  bool word_start = true;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = DecodeCodePoint(s, &pos);
    bool separator = IsPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      AppendCodePoint(c, &out);
      word_start = true;
      continue;
    }
    AppendCodePoint(word_start ? ToUpperCodePoint(c) : ToLowerCodePoint(c), &out);
    word_start = false;
  }
  return Derived(std::move(out), in);
}
absl::StatusOr<Value> Capitalize(Evaluator&, const Value& in, const ArgReader&) {
  return Derived(PythonCapitalize(in.ToText().str()), in);
}

absl::StatusOr<Value> Replace(Evaluator&, const Value& in, const ArgReader& a) {
  ASSIGN_OR_RETURN(Value old, a.Require(0, "old"));
  ASSIGN_OR_RETURN(Value replacement, a.Require(1, "new"));
  Value count = a.GetOr(2, "count", Value::None());
  return Value::String(ReplaceText(in.ToText(), old.ToText().str(), replacement.ToText(),
                                   count.is_integer() ? count.int_value() : -1));
}

absl::StatusOr<Value> String(Evaluator&, const Value& in, const ArgReader&) {
  return in.is_string() ? in : Value::String(in.ToText());
}

absl::StatusOr<Value> Safe(Evaluator&, const Value& in, const ArgReader&) { return Value::Markup(in.ToText()); }

absl::StatusOr<Value> Escape(Evaluator&, const Value& in, const ArgReader&) {
  if (in.is_markup()) return in;
  return Value::Markup(EscapeHtml(in.ToText()));
}

absl::StatusOr<Value> ForceEscape(Evaluator&, const Value& in, const ArgReader&) {
  return Value::Markup(EscapeHtml(in.ToText()));
}

// jinja2's striptags: tags and comments removed, whitespace runs collapsed
// to one space, entities unescaped.
absl::StatusOr<Value> StripTags(Evaluator&, const Value& in, const ArgReader&) {
  std::string s = in.ToText().str();
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t end = s.find("-->", i + 4);
      i = end == std::string::npos ? s.size() : end + 3;
    } else if (s[i] == '<' && s.find('>', i + 1) != std::string::npos) {
      i = s.find('>', i + 1) + 1;
    } else {
      text.push_back(s[i++]);
    }
  }
  std::string words;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    if (IsPythonSpace(DecodeCodePoint(text, &pos))) continue;
    size_t end = pos;
    while (end < text.size()) {
      size_t next = end;
      if (IsPythonSpace(DecodeCodePoint(text, &next))) break;
      end = next;
    }
    if (!words.empty()) words.push_back(' ');
    words += text.substr(start, end - start);
    pos = end;
  }
  static constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&#34;", "\""}, {"&#39;", "'"}, {"&quot;", "\""}, {"&amp;", "&"}};
  for (const auto& [entity, ch] : kEntities) {
    for (size_t at = words.find(entity); at != std::string::npos; at = words.find(entity, at + ch.size())) {
      words.replace(at, entity.size(), ch);
    }
  }
  return Derived(std::move(words), in);
}

// jinja2's truncate(length=255, killwords=False, end='...', leeway=5).
absl::StatusOr<Value> Truncate(Evaluator&, const Value& in, const ArgReader& a) {
  int64_t length = a.GetOr(0, "length", Value::Int(255)).int_value();
  bool killwords = a.GetOr(1, "killwords", Value::Bool(false)).Truthy();
  std::string end = a.GetOr(2, "end", Value::Literal("...")).ToText().str();
  int64_t leeway = a.GetOr(3, "leeway", Value::Int(5)).int_value();
  Text t = in.ToText();
  std::vector<size_t> offsets = CodePointOffsets(t.str());
  int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  int64_t end_len = static_cast<int64_t>(CodePointCount(end));
  if (length < end_len) return absl::InvalidArgumentError("AssertionError: expected length >= len(end)");
  if (leeway < 0) return absl::InvalidArgumentError("AssertionError: expected leeway >= 0");
  if (n <= length + leeway) return Value::String(t);
  std::string cut = t.str().substr(0, offsets[length - end_len]);
  if (!killwords) {
    size_t space = cut.rfind(' ');
    if (space != std::string::npos) cut.resize(space);
  }
  return Derived(cut + end, in);
}

absl::StatusOr<Value> ToJsonFilter(Evaluator&, const Value& in, const ArgReader& a) {
  RETURN_IF_ERROR(a.Check(4, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  return ToJson(in, a.GetOr(1, "indent", Value::None()), a.GetOr(2, "separators", Value::None()),
                a.GetOr(3, "sort_keys", Value::Bool(false)).Truthy(),
                a.GetOr(0, "ensure_ascii", Value::Bool(false)).Truthy());
}

absl::StatusOr<Value> Int(Evaluator&, const Value& in, const ArgReader& a) {
  Value fallback = a.GetOr(0, "default", Value::Int(0));
  if (in.is_integer()) return Value::Int(in.int_value());
  if (in.kind() == Value::Kind::kFloat) return Value::Int(static_cast<int64_t>(in.number_value()));
  if (in.is_string()) {
    std::string s = StripText(in.text(), std::nullopt, true, true).str();
    char* end = nullptr;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value::Int(i);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
  }
  return fallback;
}

absl::StatusOr<Value> Float(Evaluator&, const Value& in, const ArgReader& a) {
  Value fallback = a.GetOr(0, "default", Value::Float(0));
  if (in.is_number()) return Value::Float(in.number_value());
  if (in.is_string()) {
    std::string s = StripText(in.text(), std::nullopt, true, true).str();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::Float(d);
  }
  return fallback;
}

absl::StatusOr<Value> Abs(Evaluator&, const Value& in, const ArgReader&) {
  if (in.is_integer()) return Value::Int(std::llabs(in.int_value()));
  if (in.is_number()) return Value::Float(std::fabs(in.number_value()));
  return absl::InvalidArgumentError(absl::StrCat("TypeError: bad operand type for abs(): '", in.TypeName(), "'"));
}

absl::StatusOr<Value> Round(Evaluator&, const Value& in, const ArgReader& a) {
  if (!in.is_number()) return absl::InvalidArgumentError("TypeError: round filter needs a number");
  int64_t precision = a.GetOr(0, "precision", Value::Int(0)).int_value();
  std::string method = a.GetOr(1, "method", Value::Literal("common")).ToText().str();
  if (method == "common" && in.is_integer()) return Value::Int(in.int_value());  // round(int, n) is an int
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = in.number_value() * scale;
  if (method == "common") {
    double r = std::nearbyint(x);  // Python's round: half to even
    if (std::fabs(x - std::trunc(x)) != 0.5) r = std::round(x);
    x = r;
  } else if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    return absl::InvalidArgumentError("FilterArgumentError: method must be common, ceil or floor");
  }
  return Value::Float(x / scale);
}

absl::StatusOr<Value> Default(Evaluator&, const Value& in, const ArgReader& a) {
  Value fallback = a.GetOr(0, "default_value", Value::Literal(""));
  bool boolean = a.GetOr(1, "boolean", Value::Bool(false)).Truthy();
  if (in.is_undefined() || (boolean && !in.Truthy())) return fallback;
  return in;
}

absl::StatusOr<Value> Format(Evaluator&, const Value& in, const ArgReader& a) {
  if (!a.args().keyword.empty() && !a.args().positional.empty()) {
    return absl::InvalidArgumentError("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  }
  if (!a.args().keyword.empty()) {
    DictData d;
    for (const auto& [k, v] : a.args().keyword) d.Set(Value::Literal(k), v);
    return PercentFormat(Value::String(in.ToText()), Value::Dict(std::move(d)));  // "%(name)s"
  }
  return PercentFormat(Value::String(in.ToText()), Value::List(a.args().positional, /*is_tuple=*/true));
}

absl::StatusOr<Value> Indent(Evaluator&, const Value& in, const ArgReader& a) {
  Value width = a.GetOr(0, "width", Value::Int(4));
  bool first = a.GetOr(1, "first", Value::Bool(false)).Truthy();
  bool blank = a.GetOr(2, "blank", Value::Bool(false)).Truthy();
  if (width.is_integer() && width.int_value() > kMaxPadding) {
    return absl::InvalidArgumentError("MemoryError: indent width exceeds 64 MiB");
  }
  std::string pad = width.is_string() ? width.str() : std::string(std::max<int64_t>(width.int_value(), 0), ' ');
  Text s = in.ToText();
  Text out;
  size_t begin = 0;
  bool first_line = true;
  while (begin <= s.size()) {
    size_t nl = s.str().find('\n', begin);
    size_t end = nl == std::string::npos ? s.size() : nl;
    Text line = s.Substr(begin, end - begin);
    bool is_blank = line.str().find_first_not_of(" \t") == std::string::npos;
    if ((!first_line || first) && (blank || !is_blank)) out.AppendLiteral(pad);
    out.Append(line);
    if (nl == std::string::npos) break;
    out.Append(s.Substr(nl, 1));
    begin = nl + 1;
    first_line = false;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Center(Evaluator&, const Value& in, const ArgReader& a) {
  int64_t width = a.GetOr(0, "width", Value::Int(80)).int_value();
  if (width > kMaxPadding) return absl::InvalidArgumentError("MemoryError: center width exceeds 64 MiB");
  std::string s = in.ToText().str();
  int64_t n = static_cast<int64_t>(CodePointCount(s));
  if (width <= n) return Derived(s, in);
  int64_t total = width - n;
  int64_t left = total / 2 + (total & width & 1);  // Python's str.center
  return Derived(std::string(left, ' ') + s + std::string(total - left, ' '), in);
}

absl::StatusOr<Value> Wordcount(Evaluator&, const Value& in, const ArgReader&) {
  std::string s = in.ToText().str();
  int64_t words = 0;
  bool in_word = false;
  for (char c : s) {
    bool word_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                     static_cast<unsigned char>(c) >= 0x80;
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::Int(words);
}

struct Entry {
  std::string_view name;
  FilterFunction fn;
};
constexpr Entry kFilters[] = {
    {"trim", Trim},       {"upper", Upper},     {"lower", Lower},         {"title", Title},
    {"capitalize", Capitalize}, {"replace", Replace}, {"string", String}, {"safe", Safe},
    {"e", Escape},        {"escape", Escape},   {"forceescape", ForceEscape}, {"tojson", ToJsonFilter},
    {"striptags", StripTags}, {"truncate", Truncate},
    {"int", Int},         {"float", Float},     {"abs", Abs},             {"round", Round},
    {"default", Default}, {"d", Default},       {"format", Format},       {"indent", Indent},
    {"center", Center},   {"wordcount", Wordcount},
};

}  // namespace

FilterFunction FindTextFilter(std::string_view name) {
  for (const Entry& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace kvfleet::jinja
