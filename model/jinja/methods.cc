#include "model/jinja/methods.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {
namespace {

absl::Status TypeError(std::string_view what) { return absl::InvalidArgumentError(absl::StrCat("TypeError: ", std::string(what))); }

using Method = absl::StatusOr<Value> (*)(const Value& self, const CallArgs& args);

absl::StatusOr<std::optional<std::string>> OptionalString(const ArgReader& r, size_t i, std::string_view name) {
  std::optional<Value> v = r.Get(i, name);
  if (!v.has_value() || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return TypeError(absl::StrCat(std::string(name), " must be None or str, not ", v->TypeName()));
  return std::optional<std::string>(v->str());
}

absl::StatusOr<Value> Strip(const Value& self, const CallArgs& args, bool left, bool right) {
  ArgReader r(args, "strip");
  RETURN_IF_ERROR(r.Check(1, {}));
  ASSIGN_OR_RETURN(std::optional<std::string> chars, OptionalString(r, 0, "chars"));
  return Value::String(StripText(self.text(), chars, left, right));
}

// str.split(sep=None, maxsplit=-1) and rsplit.
absl::StatusOr<Value> Split(const Value& self, const CallArgs& args, bool from_right) {
  ArgReader r(args, from_right ? "rsplit" : "split");
  RETURN_IF_ERROR(r.Check(2, {"sep", "maxsplit"}));
  ASSIGN_OR_RETURN(std::optional<std::string> sep, OptionalString(r, 0, "sep"));
  int64_t maxsplit = r.GetOr(1, "maxsplit", Value::Int(-1)).int_value();
  const Text& t = self.text();
  const std::string& s = t.str();
  std::vector<Value> parts;
  if (sep.has_value()) {
    if (sep->empty()) return absl::InvalidArgumentError("ValueError: empty separator");
    std::vector<std::pair<size_t, size_t>> spans;  // [begin, end)
    if (!from_right) {
      size_t begin = 0;
      for (size_t at = s.find(*sep); at != std::string::npos && (maxsplit < 0 || static_cast<int64_t>(spans.size()) < maxsplit);
           at = s.find(*sep, begin)) {
        spans.emplace_back(begin, at);
        begin = at + sep->size();
      }
      spans.emplace_back(begin, s.size());
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(spans.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string::npos) break;
        spans.emplace_back(at + sep->size(), end);
        end = at;
      }
      spans.emplace_back(0, end);
      std::reverse(spans.begin(), spans.end());
    }
    for (auto [b, e] : spans) parts.push_back(Value::String(t.Substr(b, e - b)));
    return Value::List(std::move(parts));
  }
  // Runs of whitespace separate; leading/trailing whitespace gives no empty parts.
  std::vector<std::pair<size_t, size_t>> words;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    size_t next = pos;
    if (IsPythonSpace(DecodeCodePoint(s, &next))) {
      pos = next;
      continue;
    }
    while (pos < s.size()) {
      next = pos;
      if (IsPythonSpace(DecodeCodePoint(s, &next))) break;
      pos = next;
    }
    words.emplace_back(start, pos);
  }
  if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
    if (!from_right) {
      size_t rest_begin = words[maxsplit].first;
      size_t rest_end = s.size() - TrailingSpaceBytes(s);
      words.resize(maxsplit);
      words.emplace_back(rest_begin, rest_end);
    } else {
      size_t keep_from = words.size() - maxsplit;
      size_t rest_end = words[keep_from - 1].second;
      size_t rest_begin = LeadingSpaceBytes(s);
      std::vector<std::pair<size_t, size_t>> kept = {{rest_begin, rest_end}};
      kept.insert(kept.end(), words.begin() + keep_from, words.end());
      words = std::move(kept);
    }
  }
  for (auto [b, e] : words) parts.push_back(Value::String(t.Substr(b, e - b)));
  return Value::List(std::move(parts));
}

absl::StatusOr<Value> StartsOrEnds(const Value& self, const CallArgs& args, bool starts) {
  ArgReader r(args, starts ? "startswith" : "endswith");
  ASSIGN_OR_RETURN(Value affix, r.Require(0, "prefix"));
  std::vector<Value> options = affix.is_list() ? affix.list().items : std::vector<Value>{affix};
  const std::string& s = self.str();
  for (const Value& o : options) {
    if (!o.is_string()) return TypeError("startswith first arg must be str or a tuple of str");
    const std::string& a = o.str();
    if (a.size() <= s.size() && (starts ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

absl::StatusOr<Value> Find(const Value& self, const CallArgs& args, bool from_right) {
  ArgReader r(args, "find");
  ASSIGN_OR_RETURN(Value needle, r.Require(0, "sub"));
  if (!needle.is_string()) return TypeError("must be str");
  size_t at = from_right ? self.str().rfind(needle.str()) : self.str().find(needle.str());
  if (at == std::string::npos) return Value::Int(-1);
  return Value::Int(static_cast<int64_t>(CodePointCount(std::string_view(self.str()).substr(0, at))));
}

absl::StatusOr<Value> Count(const Value& self, const CallArgs& args) {
  ArgReader r(args, "count");
  ASSIGN_OR_RETURN(Value needle, r.Require(0, "x"));
  int64_t n = 0;
  if (self.is_list()) {
    for (const Value& item : self.list().items) n += item.Equals(needle);
    return Value::Int(n);
  }
  if (!needle.is_string()) return TypeError("must be str");
  const std::string& s = self.str();
  const std::string& sub = needle.str();
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return Value::Int(n);
}

// str.format: "{}", "{0}", "{name}" with plain conversions.
absl::StatusOr<Value> Format(const Value& self, const CallArgs& args) {
  const std::string& f = self.str();
  std::string out;
  bool from_input = self.text().HasInput();
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
    } else if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out.push_back('}');
      ++i;
    } else if (f[i] == '{') {
      size_t close = f.find('}', i);
      if (close == std::string::npos) return absl::InvalidArgumentError("ValueError: Single '{' encountered in format string");
      std::string field = f.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos) {
        return absl::InvalidArgumentError("str.format with conversions or format specs is not supported");
      }
      std::optional<Value> v;
      if (field.empty()) {
        if (auto_index < args.positional.size()) v = args.positional[auto_index++];
      } else if (std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        size_t index = std::stoul(field);
        if (index < args.positional.size()) v = args.positional[index];
      } else {
        for (const auto& [k, val] : args.keyword) {
          if (k == field) v = val;
        }
      }
      if (!v.has_value()) return absl::InvalidArgumentError(absl::StrCat("IndexError: format field '", field, "' has no argument"));
      Text t = v->ToText();
      from_input |= t.HasInput();
      out += t.str();
      i = close;
    } else {
      out.push_back(f[i]);
    }
  }
  return Value::String(Text::Derived(std::move(out), from_input));
}

absl::StatusOr<Value> Join(const Value& self, const CallArgs& args) {
  ArgReader r(args, "join");
  ASSIGN_OR_RETURN(Value iterable, r.Require(0, "iterable"));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return TypeError(absl::StrCat("sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
    }
    if (i > 0) out.Append(self.text());
    out.Append(items[i].text());
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Splitlines(const Value& self, const CallArgs& args) {
  bool keepends = ArgReader(args, "splitlines").GetOr(0, "keepends", Value::Bool(false)).Truthy();
  const std::string& s = self.str();
  std::vector<Value> lines;
  size_t begin = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t start = pos;
    char32_t c = DecodeCodePoint(s, &pos);
    bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                    c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) continue;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.push_back(Value::String(self.text().Substr(begin, (keepends ? pos : start) - begin)));
    begin = pos;
  }
  if (begin < s.size()) lines.push_back(Value::String(self.text().Substr(begin)));
  return Value::List(std::move(lines));
}

template <bool (*Pred)(char32_t)>
absl::StatusOr<Value> AllChars(const Value& self, const CallArgs&) {
  const std::string& s = self.str();
  if (s.empty()) return Value::Bool(false);
  for (size_t pos = 0; pos < s.size();) {
    if (!Pred(DecodeCodePoint(s, &pos))) return Value::Bool(false);
  }
  return Value::Bool(true);
}
bool IsDigitChar(char32_t c) { return c >= '0' && c <= '9'; }
bool IsAlphaChar(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c > 0x7F; }
bool IsAlnumChar(char32_t c) { return IsDigitChar(c) || IsAlphaChar(c); }

absl::StatusOr<Value> CaseCheck(const Value& self, bool upper) {
  bool cased = false;
  for (char c : self.str()) {
    if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z')) return Value::Bool(false);
    cased |= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return Value::Bool(cased);
}

absl::StatusOr<Value> StringMethod(std::string_view name, const Value& self, const CallArgs& args) {
  auto derived = [&](std::string s) { return Value::String(Text::Derived(std::move(s), self.text().HasInput())); };
  if (name == "strip") return Strip(self, args, true, true);
  if (name == "lstrip") return Strip(self, args, true, false);
  if (name == "rstrip") return Strip(self, args, false, true);
  if (name == "split") return Split(self, args, false);
  if (name == "rsplit") return Split(self, args, true);
  if (name == "startswith") return StartsOrEnds(self, args, true);
  if (name == "endswith") return StartsOrEnds(self, args, false);
  if (name == "upper") return derived(PythonUpper(self.str()));
  if (name == "lower") return derived(PythonLower(self.str()));
  if (name == "title") return derived(PythonTitle(self.str()));
  if (name == "capitalize") return derived(PythonCapitalize(self.str()));
  if (name == "find") return Find(self, args, false);
  if (name == "rfind") return Find(self, args, true);
  if (name == "count") return Count(self, args);
  if (name == "format") return Format(self, args);
  if (name == "join") return Join(self, args);
  if (name == "splitlines") return Splitlines(self, args);
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return AllChars<IsDigitChar>(self, args);
  if (name == "isalpha") return AllChars<IsAlphaChar>(self, args);
  if (name == "isalnum") return AllChars<IsAlnumChar>(self, args);
  if (name == "isspace") return AllChars<IsPythonSpace>(self, args);
  if (name == "isupper") return CaseCheck(self, true);
  if (name == "islower") return CaseCheck(self, false);
  if (name == "swapcase") {
    std::string out;
    const std::string& str = self.str();
    for (size_t pos = 0; pos < str.size();) {
      char32_t c = DecodeCodePoint(str, &pos);
      AppendCodePoint(ToLowerCodePoint(c) != c ? ToLowerCodePoint(c) : ToUpperCodePoint(c), &out);
    }
    return derived(std::move(out));
  }
  if (name == "index" || name == "rindex") {
    ASSIGN_OR_RETURN(Value found, Find(self, args, name == "rindex"));
    if (found.int_value() < 0) return absl::InvalidArgumentError("ValueError: substring not found");
    return found;
  }
  if (name == "partition" || name == "rpartition") {
    ASSIGN_OR_RETURN(Value sep, ArgReader(args, name).Require(0, "sep"));
    if (!sep.is_string() || sep.str().empty()) return absl::InvalidArgumentError("ValueError: empty separator");
    const std::string& str = self.str();
    size_t at = name == "partition" ? str.find(sep.str()) : str.rfind(sep.str());
    Value empty = Value::Literal("");
    if (at == std::string::npos) {
      return name == "partition" ? Value::List({self, empty, empty}, true) : Value::List({empty, empty, self}, true);
    }
    return Value::List({Value::String(self.text().Substr(0, at)), Value::String(self.text().Substr(at, sep.str().size())),
                        Value::String(self.text().Substr(at + sep.str().size()))},
                       true);
  }
  if (name == "ljust" || name == "rjust" || name == "center" || name == "zfill") {
    ArgReader r(args, name);
    ASSIGN_OR_RETURN(Value width, r.Require(0, "width"));
    std::string fill = name == "zfill" ? "0" : r.GetOr(1, "fillchar", Value::Literal(" ")).ToText().str();
    if (width.int_value() > (64 << 20)) return absl::InvalidArgumentError("MemoryError: width exceeds 64 MiB");
    int64_t n = static_cast<int64_t>(CodePointCount(self.str()));
    int64_t pad = std::max<int64_t>(width.int_value() - n, 0);
    int64_t left = name == "rjust" || name == "zfill" ? pad : name == "ljust" ? 0 : pad / 2 + (pad & width.int_value() & 1);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += fill;
    std::string body = self.str();
    if (name == "zfill" && !body.empty() && (body[0] == '-' || body[0] == '+') && left > 0) {
      out = std::string(1, body[0]) + out;
      body.erase(0, 1);
    }
    out += body;
    for (int64_t i = left; i < pad; ++i) out += fill;
    return derived(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ASSIGN_OR_RETURN(Value affix, ArgReader(args, name).Require(0, "affix"));
    const std::string& str = self.str();
    std::string a = affix.ToText().str();
    if (name == "removeprefix" && str.compare(0, a.size(), a) == 0) return Value::String(self.text().Substr(a.size()));
    if (name == "removesuffix" && a.size() <= str.size() && !a.empty() && str.compare(str.size() - a.size(), a.size(), a) == 0) {
      return Value::String(self.text().Substr(0, str.size() - a.size()));
    }
    return self;
  }
  if (name == "replace") {
    ArgReader r(args, "replace");
    ASSIGN_OR_RETURN(Value old, r.Require(0, "old"));
    ASSIGN_OR_RETURN(Value replacement, r.Require(1, "new"));
    if (!old.is_string() || !replacement.is_string()) return TypeError("replace() arguments must be str");
    return Value::String(ReplaceText(self.text(), old.str(), replacement.text(), r.GetOr(2, "count", Value::Int(-1)).int_value()));
  }
  return absl::InternalError(absl::StrCat("no str method ", std::string(name)));
}

constexpr std::string_view kStringMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower", "title",
    "capitalize", "find", "rfind", "count", "format", "join", "splitlines", "isdigit", "isnumeric", "isdecimal",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "replace", "swapcase", "index", "rindex", "partition",
    "rpartition", "ljust", "rjust", "center", "zfill", "removeprefix", "removesuffix"};

absl::StatusOr<Value> DictMethod(std::string_view name, const Value& self, const CallArgs& args) {
  const DictData& d = self.dict();
  if (name == "get") {
    ArgReader r(args, "get");
    ASSIGN_OR_RETURN(Value key, r.Require(0, "key"));
    const Value* v = d.Find(key);
    return v != nullptr ? *v : r.GetOr(1, "default", Value::None());
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.entries) {
    if (name == "keys") {
      out.push_back(k);
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::List({k, v}, /*is_tuple=*/true));
    }
  }
  if (name == "copy") return Value::Dict(d);
  return Value::Sequence(std::move(out), SeqKind::kView, absl::StrCat("dict_", std::string(name)));
}

}  // namespace

std::optional<Value> BindMethod(const Value& obj, std::string_view name) {
  auto bind = [&](auto fn) {
    std::string method(name);
    return Value::Function(method, [self = obj, method, fn](const CallArgs& args) { return fn(method, self, args); });
  };
  if (obj.is_string()) {
    for (std::string_view m : kStringMethods) {
      if (m == name) return bind(StringMethod);
    }
    return std::nullopt;
  }
  if (obj.kind() == Value::Kind::kDict) {
    if (name == "get" || name == "keys" || name == "values" || name == "items" || name == "copy") return bind(DictMethod);
    if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear") {
      return bind([](const std::string& m, const Value&, const CallArgs&) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError(absl::StrCat("SecurityError: access to attribute '", m,
                                                       "' of 'dict' object is unsafe"));
      });
    }
    return std::nullopt;
  }
  if (obj.is_list()) {
    if (name == "count") return bind([](const std::string&, const Value& self, const CallArgs& args) { return Count(self, args); });
    if (name == "index") {
      return bind([](const std::string&, const Value& self, const CallArgs& args) -> absl::StatusOr<Value> {
        ASSIGN_OR_RETURN(Value x, ArgReader(args, "index").Require(0, "value"));
        const auto& items = self.list().items;
        for (size_t i = 0; i < items.size(); ++i) {
          if (items[i].Equals(x)) return Value::Int(static_cast<int64_t>(i));
        }
        return absl::InvalidArgumentError(absl::StrCat("ValueError: ", x.Repr(), " is not in list"));
      });
    }
    if (!obj.list().is_tuple && (name == "append" || name == "pop" || name == "extend" || name == "insert" ||
                                 name == "remove" || name == "sort" || name == "reverse" || name == "clear")) {
      return bind([](const std::string& m, const Value&, const CallArgs&) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError(absl::StrCat("SecurityError: access to attribute '", m,
                                                       "' of 'list' object is unsafe"));
      });
    }
  }
  return std::nullopt;
}

Text StripText(const Text& s, const std::optional<std::string>& chars, bool left, bool right) {
  std::string_view str = s.str();
  size_t begin = 0, end = str.size();
  if (!chars.has_value()) {
    if (left) begin = LeadingSpaceBytes(str);
    if (right && begin < end) end -= TrailingSpaceBytes(str.substr(begin));
  } else {
    std::vector<char32_t> set;
    for (size_t p = 0; p < chars->size();) set.push_back(DecodeCodePoint(*chars, &p));
    auto in_set = [&](char32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
    if (left) {
      while (begin < end) {
        size_t next = begin;
        if (!in_set(DecodeCodePoint(str, &next))) break;
        begin = next;
      }
    }
    if (right) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(str[start]) & 0xC0) == 0x80) --start;
        size_t p = start;
        if (!in_set(DecodeCodePoint(str, &p))) break;
        end = start;
      }
    }
  }
  return s.Substr(begin, end - begin);
}

Text ReplaceText(const Text& s, std::string_view old, const Text& replacement, int64_t count) {
  const std::string& str = s.str();
  Text out;
  size_t begin = 0;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts the replacement between characters
    std::vector<size_t> offsets = CodePointOffsets(str);
    for (size_t i = 0; i + 1 < offsets.size() + 1; ++i) {
      if (count < 0 || done < count) {
        out.Append(replacement);
        ++done;
      }
      if (i + 1 < offsets.size()) out.Append(s.Substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    return out;
  }
  for (size_t at = str.find(old); at != std::string::npos && (count < 0 || done < count); at = str.find(old, begin)) {
    out.Append(s.Substr(begin, at - begin));
    out.Append(replacement);
    begin = at + old.size();
    ++done;
  }
  out.Append(s.Substr(begin));
  return out;
}

Text EscapeHtml(const Text& s) {
  Text out;
  size_t begin = 0;
  const std::string& str = s.str();
  for (size_t i = 0; i < str.size(); ++i) {
    std::string_view entity;
    switch (str[i]) {
      case '&': entity = "&amp;"; break;
      case '<': entity = "&lt;"; break;
      case '>': entity = "&gt;"; break;
      case '"': entity = "&#34;"; break;
      case '\'': entity = "&#39;"; break;
      default: continue;
    }
    out.Append(s.Substr(begin, i - begin));
    out.Append(Text::Derived(std::string(entity), s.IsInputByte(i)));
    begin = i + 1;
  }
  out.Append(s.Substr(begin));
  return out;
}

std::string PythonUpper(std::string_view s) { return UnicodeUpper(s); }

std::string PythonLower(std::string_view s) { return UnicodeLower(s); }

std::string PythonTitle(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = DecodeCodePoint(s, &pos);
    bool cased = IsCased(c);
    AppendCodePoint(cased ? (previous_cased ? ToLowerCodePoint(c) : ToUpperCodePoint(c)) : c, &out);
    previous_cased = cased;
  }
  return out;
}

std::string PythonCapitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t pos = 0;
  char32_t first = DecodeCodePoint(s, &pos);
  std::string out;
  AppendCodePoint(ToUpperCodePoint(first), &out);
  return out + UnicodeLower(s.substr(pos));
}

}  // namespace kvfleet::jinja
