#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/jinja/filters.h"
#include "model/jinja/methods.h"

namespace kvfleet::jinja {
namespace {

Value Generator(std::vector<Value> items) { return Value::Sequence(std::move(items), SeqKind::kGenerator, "generator"); }

absl::StatusOr<Value> First(Evaluator&, const Value& in, const ArgReader&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> Last(Evaluator&, const Value& in, const ArgReader&) {
  if (in.is_list() && in.list().kind == SeqKind::kGenerator) {
    return absl::InvalidArgumentError(absl::StrCat("TypeError: '", in.TypeName(), "' object is not reversible"));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> LengthFilter(Evaluator&, const Value& in, const ArgReader&) {
  ASSIGN_OR_RETURN(int64_t n, Length(in));
  return Value::Int(n);
}

absl::StatusOr<Value> Join(Evaluator&, const Value& in, const ArgReader& a) {
  Value sep = a.GetOr(0, "d", Value::Literal(""));
  std::optional<Value> attribute = a.Get(1, "attribute");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.Append(sep.ToText());
    Value item = items[i];
    if (attribute.has_value()) {
      ASSIGN_OR_RETURN(item, GetAttributePath(item, *attribute));
    }
    out.Append(item.ToText());
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> List(Evaluator&, const Value& in, const ArgReader&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> Items(Evaluator&, const Value& in, const ArgReader&) {
  if (in.is_undefined()) return Generator({});
  if (!in.is_mapping()) return absl::InvalidArgumentError(absl::StrCat("TypeError: Can only get item pairs from a mapping."));
  std::vector<Value> pairs;
  for (const auto& [k, v] : in.dict().entries) pairs.push_back(Value::List({k, v}, /*is_tuple=*/true));
  return Generator(std::move(pairs));
}

// A string reversed; a list's or tuple's reversed() iterator; anything else
// iterated into a list and reversed, as jinja2 does.
absl::StatusOr<Value> Reverse(Evaluator&, const Value& in, const ArgReader&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  std::reverse(items.begin(), items.end());
  if (in.is_string()) {
    Text out;
    for (const Value& c : items) out.Append(c.text());
    return Value::String(std::move(out));
  }
  if (in.is_plain_list()) {
    return Value::Sequence(std::move(items), SeqKind::kGenerator, in.list().is_tuple ? "reversed" : "list_reverseiterator");
  }
  return Value::List(std::move(items));
}

// select / reject / selectattr / rejectattr: keep items whose test (by
// name, with arguments after it) is true (select) or false (reject); with
// no test, the item's truth.
absl::StatusOr<Value> SelectOrReject(Evaluator& ev, const Value& in, const ArgReader& a, bool on_attribute,
                                     bool keep_when) {
  if (!in.Truthy()) return Generator({});  // jinja2 iterates only a truthy input
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  const auto& pos = a.args().positional;
  size_t next = 0;
  std::optional<Value> attribute;
  if (on_attribute) {
    if (pos.empty()) return absl::InvalidArgumentError("TypeError: selectattr/rejectattr need an attribute");
    attribute = pos[next++];
  }
  std::optional<std::string> test;
  if (next < pos.size()) test = pos[next++].ToText().str();
  CallArgs test_args;
  test_args.positional.assign(pos.begin() + next, pos.end());
  test_args.keyword = a.args().keyword;
  std::vector<Value> kept;
  for (const Value& item : items) {
    Value subject = item;
    if (attribute.has_value()) {
      ASSIGN_OR_RETURN(subject, GetAttributePath(item, *attribute));
    }
    bool verdict;
    if (test.has_value()) {
      ASSIGN_OR_RETURN(verdict, ev.ApplyTest(*test, subject, test_args));
    } else {
      verdict = subject.Truthy();
    }
    if (verdict == keep_when) kept.push_back(item);
  }
  return Generator(std::move(kept));
}

absl::StatusOr<Value> Select(Evaluator& ev, const Value& in, const ArgReader& a) { return SelectOrReject(ev, in, a, false, true); }
absl::StatusOr<Value> Reject(Evaluator& ev, const Value& in, const ArgReader& a) { return SelectOrReject(ev, in, a, false, false); }
absl::StatusOr<Value> SelectAttr(Evaluator& ev, const Value& in, const ArgReader& a) { return SelectOrReject(ev, in, a, true, true); }
absl::StatusOr<Value> RejectAttr(Evaluator& ev, const Value& in, const ArgReader& a) { return SelectOrReject(ev, in, a, true, false); }

absl::StatusOr<Value> Map(Evaluator& ev, const Value& in, const ArgReader& a) {
  if (!in.Truthy()) return Generator({});
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  std::vector<Value> out;
  std::optional<Value> attribute;
  std::optional<Value> fallback;
  for (const auto& [k, v] : a.args().keyword) {
    if (k == "attribute") attribute = v;
    if (k == "default") fallback = v;
  }
  if (attribute.has_value()) {
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value v, GetAttributePath(item, *attribute));
      out.push_back(v.is_undefined() && fallback.has_value() ? *fallback : v);
    }
    return Generator(std::move(out));
  }
  const auto& pos = a.args().positional;
  if (pos.empty()) return absl::InvalidArgumentError("TypeError: map needs a filter name or attribute=");
  std::string filter = pos[0].ToText().str();
  CallArgs rest;
  rest.positional.assign(pos.begin() + 1, pos.end());
  for (const auto& kw : a.args().keyword) rest.keyword.push_back(kw);
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, ev.ApplyFilter(filter, item, rest));
    out.push_back(std::move(v));
  }
  return Generator(std::move(out));
}

// The sort key jinja2 uses: the attribute (if any), lowercased strings
// unless case_sensitive.
absl::StatusOr<Value> SortKey(const Value& item, const std::optional<Value>& attribute, bool case_sensitive) {
  Value key = item;
  if (attribute.has_value()) {
    ASSIGN_OR_RETURN(key, GetAttributePath(item, *attribute));
  }
  if (!case_sensitive && key.is_string()) return Value::Literal(PythonLower(key.str()));
  return key;
}

absl::StatusOr<std::vector<Value>> Sorted(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    absl::StatusOr<bool> less = reverse ? LessThan(keys[y], keys[x]) : LessThan(keys[x], keys[y]);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  RETURN_IF_ERROR(error);
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

absl::StatusOr<Value> Sort(Evaluator&, const Value& in, const ArgReader& a) {
  bool reverse = a.GetOr(0, "reverse", Value::Bool(false)).Truthy();
  bool case_sensitive = a.GetOr(1, "case_sensitive", Value::Bool(false)).Truthy();
  std::optional<Value> attribute = a.Get(2, "attribute");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  std::vector<Value> keys;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value k, SortKey(item, attribute, case_sensitive));
    keys.push_back(std::move(k));
  }
  ASSIGN_OR_RETURN(std::vector<Value> sorted, Sorted(std::move(items), keys, reverse));
  return Value::List(std::move(sorted));
}

absl::StatusOr<Value> DictSort(Evaluator&, const Value& in, const ArgReader& a) {
  bool case_sensitive = a.GetOr(0, "case_sensitive", Value::Bool(false)).Truthy();
  std::string by = a.GetOr(1, "by", Value::Literal("key")).ToText().str();
  bool reverse = a.GetOr(2, "reverse", Value::Bool(false)).Truthy();
  if (!in.is_mapping()) return absl::InvalidArgumentError("TypeError: dictsort needs a mapping");
  std::vector<Value> items, keys;
  for (const auto& [k, v] : in.dict().entries) {
    items.push_back(Value::List({k, v}, true));
    ASSIGN_OR_RETURN(Value key, SortKey(by == "value" ? v : k, std::nullopt, case_sensitive));
    keys.push_back(std::move(key));
  }
  ASSIGN_OR_RETURN(std::vector<Value> sorted, Sorted(std::move(items), keys, reverse));
  return Value::List(std::move(sorted));
}

absl::StatusOr<Value> Unique(Evaluator&, const Value& in, const ArgReader& a) {
  bool case_sensitive = a.GetOr(0, "case_sensitive", Value::Bool(false)).Truthy();
  std::optional<Value> attribute = a.Get(1, "attribute");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  std::vector<Value> out, seen;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value key, SortKey(item, attribute, case_sensitive));
    bool dup = std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(key); });
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Generator(std::move(out));
}

absl::StatusOr<Value> MinOrMax(const Value& in, const ArgReader& a, bool want_max) {
  bool case_sensitive = a.GetOr(0, "case_sensitive", Value::Bool(false)).Truthy();
  std::optional<Value> attribute = a.Get(1, "attribute");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  if (items.empty()) return Value::Undefined(want_max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
  size_t best = 0;
  ASSIGN_OR_RETURN(Value best_key, SortKey(items[0], attribute, case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(Value key, SortKey(items[i], attribute, case_sensitive));
    ASSIGN_OR_RETURN(bool better, want_max ? LessThan(best_key, key) : LessThan(key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}
absl::StatusOr<Value> Min(Evaluator&, const Value& in, const ArgReader& a) { return MinOrMax(in, a, false); }
absl::StatusOr<Value> Max(Evaluator&, const Value& in, const ArgReader& a) { return MinOrMax(in, a, true); }

absl::StatusOr<Value> Sum(Evaluator&, const Value& in, const ArgReader& a) {
  std::optional<Value> attribute = a.Get(0, "attribute");
  Value total = a.GetOr(1, "start", Value::Int(0));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  for (const Value& item : items) {
    Value v = item;
    if (attribute.has_value()) {
      ASSIGN_OR_RETURN(v, GetAttributePath(item, *attribute));
    }
    ASSIGN_OR_RETURN(total, BinaryOp("+", total, v));
  }
  return total;
}

absl::StatusOr<Value> Batch(Evaluator&, const Value& in, const ArgReader& a) {
  ASSIGN_OR_RETURN(Value size, a.Require(0, "linecount"));
  std::optional<Value> fill = a.Get(1, "fill_with");
  if (!size.is_integer() || size.int_value() <= 0) return absl::InvalidArgumentError("batch size must be a positive integer");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  std::vector<Value> batches, current;
  for (const Value& item : items) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size.int_value()) {
      batches.push_back(Value::List(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    while (fill.has_value() && static_cast<int64_t>(current.size()) < size.int_value()) current.push_back(*fill);
    batches.push_back(Value::List(std::move(current)));
  }
  return Generator(std::move(batches));
}

// slice(n): n columns, the first ones one longer when the items do not divide.
absl::StatusOr<Value> Slice(Evaluator&, const Value& in, const ArgReader& a) {
  ASSIGN_OR_RETURN(Value count, a.Require(0, "slices"));
  std::optional<Value> fill = a.Get(1, "fill_with");
  if (!count.is_integer() || count.int_value() <= 0) return absl::InvalidArgumentError("slice count must be a positive integer");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in));
  int64_t n = static_cast<int64_t>(items.size()), slices = count.int_value();
  int64_t per = n / slices, extra = n % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t i = 0; i < slices; ++i) {
    int64_t start = offset + i * per;
    if (i < extra) ++offset;
    int64_t end = offset + (i + 1) * per;
    std::vector<Value> part(items.begin() + start, items.begin() + end);
    if (fill.has_value() && i >= extra && extra > 0) part.push_back(*fill);
    out.push_back(Value::List(std::move(part)));
  }
  return Generator(std::move(out));
}

// Python's getattr only: a dict's keys are not attributes.
absl::StatusOr<Value> Attr(Evaluator&, const Value& in, const ArgReader& a) {
  ASSIGN_OR_RETURN(Value name, a.Require(0, "name"));
  if (in.is_undefined()) return UndefinedError(in);
  if (std::optional<Value> method = BindMethod(in, name.ToText().str()); method.has_value()) return *method;
  if (in.kind() == Value::Kind::kNamespace || in.is_callable()) return GetAttribute(in, name.ToText().str());
  return Value::Undefined(absl::StrCat("'", in.TypeName(), " object' has no attribute '", name.ToText().str(), "'"));
}

struct Entry {
  std::string_view name;
  FilterFunction fn;
};
constexpr Entry kFilters[] = {
    {"first", First},   {"last", Last},     {"length", LengthFilter}, {"count", LengthFilter},
    {"join", Join},     {"list", List},     {"items", Items},         {"reverse", Reverse},
    {"select", Select}, {"reject", Reject}, {"selectattr", SelectAttr}, {"rejectattr", RejectAttr},
    {"map", Map},       {"sort", Sort},     {"dictsort", DictSort},   {"unique", Unique},
    {"min", Min},       {"max", Max},       {"sum", Sum},             {"batch", Batch},
    {"attr", Attr},     {"slice", Slice},
};

}  // namespace

FilterFunction FindSequenceFilter(std::string_view name) {
  for (const Entry& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

absl::StatusOr<Value> GetAttributePath(const Value& item, const Value& path) {
  if (path.is_integer()) return GetItem(item, path);
  Value current = item;
  std::vector<std::string> parts = absl::StrSplit(path.ToText().str(), '.');
  for (const std::string& part : parts) {
    bool is_index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (is_index) {
      ASSIGN_OR_RETURN(current, GetItem(current, Value::Int(std::stoll(part))));
    } else {
      ASSIGN_OR_RETURN(current, GetItem(current, Value::Literal(part)));
    }
  }
  return current;
}

absl::StatusOr<std::optional<Value>> CallFilter(Evaluator& ev, std::string_view name, const Value& input,
                                                const CallArgs& args) {
  FilterFunction fn = FindTextFilter(name);
  if (fn == nullptr) fn = FindSequenceFilter(name);
  if (fn == nullptr) return std::optional<Value>();
  ArgReader reader(args, name);
  ASSIGN_OR_RETURN(Value v, fn(ev, input, reader));
  return std::optional<Value>(std::move(v));
}

}  // namespace kvfleet::jinja
