// What templates call: jinja2's filters and tests, Python's str, dict and
// list methods, the globals Hugging Face provides, and Python's operators.
// Each behaves as its Python original does on the values chat templates
// pass (messages, tools, strings, numbers), including which errors it
// raises; see README.md for what is left out.
//
// Thread-safety: stateless functions; the Evaluator passed in belongs to
// one render.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/jinja/value.h"

namespace kvfleet::jinja {

// What a filter or test needs from the running render: applying another
// filter or test by name (map('upper'), select('odd')) and calling a
// function value (a macro passed as an argument).
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args) = 0;
  virtual absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args) = 0;
};

// Python-style argument binding: f(a, b=1) called as f(2) or f(b=3, a=2).
class ArgReader {
 public:
  // `offset`: positional arguments consumed before this one's index 0.
  ArgReader(const CallArgs& args, std::string_view function) : args_(args), function_(function) {}
  // The argument at `index` or named `name`; nullopt when absent.
  std::optional<Value> Get(size_t index, std::string_view name) const;
  Value GetOr(size_t index, std::string_view name, Value fallback) const;
  absl::StatusOr<Value> Require(size_t index, std::string_view name) const;
  // INVALID_ARGUMENT when more positional arguments than `max_positional`
  // were given or a keyword not in `names` was.
  absl::Status Check(size_t max_positional, std::initializer_list<std::string_view> names) const;
  const CallArgs& args() const { return args_; }

 private:
  const CallArgs& args_;
  std::string_view function_;
};

// Whether jinja2 has a built-in filter / test by that name.
bool IsJinjaFilter(std::string_view name);
bool IsJinjaTest(std::string_view name);

// nullopt when jinja2 has no filter / test by that name (a template error).
absl::StatusOr<std::optional<Value>> CallFilter(Evaluator& ev, std::string_view name, const Value& input,
                                                const CallArgs& args);
absl::StatusOr<std::optional<bool>> CallTest(Evaluator& ev, std::string_view name, const Value& input,
                                             const CallArgs& args);

// `obj.name` as jinja2's sandbox resolves it: a method or attribute of the
// Python object first, then obj[name]; Undefined when neither exists; an
// error only for reading from an Undefined.
absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name);
// `obj[key]`: the item first, then (for a string key) the attribute.
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// `obj[start:stop:step]` on strings, lists and tuples.
absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's binary operators: + - * / // % ** and jinja2's ~.
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b);
// `needle in haystack`.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle);
// The items `for x in v` visits: a list's items, a dict's keys, a string's
// characters, nothing for Undefined.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
// len(v); Undefined has length 0.
absl::StatusOr<int64_t> Length(const Value& v);
// Python's "fmt % args" for strings (%s %r %d %i %f %x %%, width/precision).
absl::StatusOr<Value> PercentFormat(const Value& format, const Value& args);

struct GlobalsOptions {
  std::time_t now = 0;  // what strftime_now formats (local time)
};
// range, dict, namespace, joiner, cycler, raise_exception, strftime_now.
DictData MakeGlobals(const GlobalsOptions& options);

// Hugging Face's tojson: json.dumps(v, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...). `indent`: None, an int or a string.
absl::StatusOr<Value> ToJson(const Value& v, const Value& indent, const Value& separators, bool sort_keys,
                             bool ensure_ascii = false);

// A status whose message tells the interpreter to report jinja2's
// UndefinedError for `v` (its hint).
absl::Status UndefinedError(const Value& v);

}  // namespace kvfleet::jinja
