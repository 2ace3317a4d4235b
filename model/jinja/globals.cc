// The names every template sees: jinja2's range, dict, namespace, joiner
// and cycler, and Hugging Face's raise_exception and strftime_now.
#include <ctime>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"

namespace kvfleet::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox refuses longer ranges

absl::StatusOr<Value> Range(const CallArgs& args) {
  std::vector<int64_t> bounds;
  for (const Value& v : args.positional) {
    if (!v.is_integer()) return absl::InvalidArgumentError(absl::StrCat("TypeError: '", v.TypeName(), "' object cannot be interpreted as an integer"));
    bounds.push_back(v.int_value());
  }
  if (bounds.empty() || bounds.size() > 3 || !args.keyword.empty()) {
    return absl::InvalidArgumentError("TypeError: range expected 1 to 3 integer arguments");
  }
  int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) return absl::InvalidArgumentError("ValueError: range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      return absl::InvalidArgumentError("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.push_back(Value::Int(i));
  }
  std::string repr = step == 1 ? absl::StrCat("range(", start, ", ", stop, ")")
                                : absl::StrCat("range(", start, ", ", stop, ", ", step, ")");
  return Value::Sequence(std::move(items), SeqKind::kRange, "range", std::move(repr));
}

absl::StatusOr<DictData> KeywordDict(const CallArgs& args, std::string_view function) {
  DictData d;
  for (const Value& v : args.positional) {
    if (!v.is_mapping()) return absl::InvalidArgumentError(absl::StrCat("TypeError: ", std::string(function), "() takes a mapping and keyword arguments"));
    for (const auto& [k, item] : v.dict().entries) d.Set(k, item);
  }
  for (const auto& [k, v] : args.keyword) d.Set(Value::Literal(k), v);
  return d;
}

}  // namespace

DictData MakeGlobals(const GlobalsOptions& options) {
  DictData g;
  auto add = [&](std::string name, NativeFunction fn) {
    g.Set(Value::Literal(name), Value::Function(name, std::move(fn)));
  };
  add("range", Range);
  add("dict", [](const CallArgs& args) -> absl::StatusOr<Value> {
    ASSIGN_OR_RETURN(DictData d, KeywordDict(args, "dict"));
    return Value::Dict(std::move(d));
  });
  add("namespace", [](const CallArgs& args) -> absl::StatusOr<Value> {
    ASSIGN_OR_RETURN(DictData d, KeywordDict(args, "namespace"));
    return Value::Namespace(std::move(d));
  });
  add("joiner", [](const CallArgs& args) -> absl::StatusOr<Value> {
    Value sep = ArgReader(args, "joiner").GetOr(0, "sep", Value::Literal(", "));
    auto used = std::make_shared<bool>(false);
    return Value::Function("joiner", [sep, used](const CallArgs&) -> absl::StatusOr<Value> {
      if (!*used) {
        *used = true;
        return Value::Literal("");
      }
      return sep;
    });
  });
  add("cycler", [](const CallArgs& args) -> absl::StatusOr<Value> {
    if (args.positional.empty()) return absl::InvalidArgumentError("TypeError: at least one item has to be provided");
    auto items = std::make_shared<std::vector<Value>>(args.positional);
    auto pos = std::make_shared<size_t>(0);
    DictData c;
    c.Set(Value::Literal("next"), Value::Function("next", [items, pos](const CallArgs&) -> absl::StatusOr<Value> {
            Value v = (*items)[*pos];
            *pos = (*pos + 1) % items->size();
            return v;
          }));
    c.Set(Value::Literal("reset"), Value::Function("reset", [pos](const CallArgs&) -> absl::StatusOr<Value> {
            *pos = 0;
            return Value::None();
          }));
    return Value::Namespace(std::move(c));
  });
  add("raise_exception", [](const CallArgs& args) -> absl::StatusOr<Value> {
    std::string message = args.positional.empty() ? "" : args.positional[0].ToText().str();
    return absl::InvalidArgumentError(absl::StrCat("TemplateError: ", message));
  });
  std::time_t now = options.now;
  add("strftime_now", [now](const CallArgs& args) -> absl::StatusOr<Value> {
    ASSIGN_OR_RETURN(Value format, ArgReader(args, "strftime_now").Require(0, "format"));
    if (!format.is_string()) return absl::InvalidArgumentError("TypeError: strftime_now() argument must be str");
    std::tm local{};
    localtime_r(&now, &local);
    char buf[512];
    size_t n = std::strftime(buf, sizeof(buf), format.str().c_str(), &local);
    return Value::Literal(std::string(buf, n));
  });
  return g;
}

}  // namespace kvfleet::jinja
