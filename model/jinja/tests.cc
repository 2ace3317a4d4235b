// jinja2's built-in tests: `x is defined`, `n is divisibleby 3`, ...
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"
#include "model/jinja/methods.h"

namespace kvfleet::jinja {
namespace {

constexpr std::string_view kJinjaFilters[] = {
    "abs",     "attr",    "batch",      "capitalize", "center",   "count",      "d",        "default",
    "dictsort", "e",      "escape",     "filesizeformat", "first", "float",     "forceescape", "format",
    "groupby", "indent",  "int",        "join",       "last",     "length",     "list",     "lower",
    "items",   "map",     "min",        "max",        "pprint",   "random",     "reject",   "rejectattr",
    "replace", "reverse", "round",      "safe",       "select",   "selectattr", "slice",    "sort",
    "string",  "striptags", "sum",      "title",      "trim",     "truncate",   "unique",   "upper",
    "urlencode", "urlize", "wordcount", "wordwrap",   "xmlattr",  "tojson"};

constexpr std::string_view kJinjaTests[] = {
    "odd",      "even",    "divisibleby", "defined",  "undefined", "filter", "test",   "none",
    "boolean",  "false",   "true",        "integer",  "float",     "lower",  "upper",  "string",
    "mapping",  "number",  "sequence",    "iterable", "callable",  "sameas", "escaped", "in",
    "==",       "eq",      "equalto",     "!=",       "ne",        ">",      "gt",     "greaterthan",
    ">=",       "ge",      "<",           "lt",       "lessthan",  "<=",     "le"};

absl::StatusOr<Value> Arg(const CallArgs& args, std::string_view test) {
  return ArgReader(args, test).Require(0, "other");
}

}  // namespace

bool IsJinjaFilter(std::string_view name) {
  return std::find(std::begin(kJinjaFilters), std::end(kJinjaFilters), name) != std::end(kJinjaFilters);
}

bool IsJinjaTest(std::string_view name) {
  return std::find(std::begin(kJinjaTests), std::end(kJinjaTests), name) != std::end(kJinjaTests);
}

absl::StatusOr<std::optional<bool>> CallTest(Evaluator& ev, std::string_view name, const Value& v,
                                             const CallArgs& args) {
  using K = Value::Kind;
  if (name == "defined") return std::optional<bool>(!v.is_undefined());
  if (name == "undefined") return std::optional<bool>(v.is_undefined());
  if (name == "none") return std::optional<bool>(v.is_none());
  if (name == "boolean") return std::optional<bool>(v.kind() == K::kBool);
  if (name == "true") return std::optional<bool>(v.kind() == K::kBool && v.bool_value());
  if (name == "false") return std::optional<bool>(v.kind() == K::kBool && !v.bool_value());
  if (name == "string") return std::optional<bool>(v.is_string());
  if (name == "number") return std::optional<bool>(v.is_number());
  if (name == "integer") return std::optional<bool>(v.kind() == K::kInt);
  if (name == "float") return std::optional<bool>(v.kind() == K::kFloat);
  if (name == "mapping") return std::optional<bool>(v.kind() == K::kDict);
  if (name == "sequence") return std::optional<bool>(v.is_string() || v.is_list() || v.is_dict());
  if (name == "iterable") return std::optional<bool>(v.is_string() || v.is_list() || v.is_dict() || v.is_undefined());
  if (name == "callable") return std::optional<bool>(v.is_callable());
  if (name == "escaped") return std::optional<bool>(false);
  if (name == "lower") return std::optional<bool>(v.is_string() && PythonLower(v.str()) == v.str());
  if (name == "upper") return std::optional<bool>(v.is_string() && PythonUpper(v.str()) == v.str());
  if (name == "odd" || name == "even") {
    if (!v.is_integer()) return absl::InvalidArgumentError(absl::StrCat("TypeError: '", std::string(name), "' needs an integer"));
    bool odd = (v.int_value() % 2) != 0;
    return std::optional<bool>(name == "odd" ? odd : !odd);
  }
  if (name == "divisibleby") {
    ASSIGN_OR_RETURN(Value n, Arg(args, name));
    ASSIGN_OR_RETURN(Value mod, BinaryOp("%", v, n));
    return std::optional<bool>(mod.number_value() == 0);
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=") {
    ASSIGN_OR_RETURN(Value other, Arg(args, name));
    bool eq = v.Equals(other);
    return std::optional<bool>(name == "ne" || name == "!=" ? !eq : eq);
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" || name == ">" ||
      name == "le" || name == "<=" || name == "ge" || name == ">=") {
    ASSIGN_OR_RETURN(Value other, Arg(args, name));
    bool lt = name == "lt" || name == "lessthan" || name == "<";
    bool gt = name == "gt" || name == "greaterthan" || name == ">";
    bool le = name == "le" || name == "<=";
    if (lt) return LessThan(v, other);
    if (gt) return LessThan(other, v);
    ASSIGN_OR_RETURN(bool strictly, le ? LessThan(other, v) : LessThan(v, other));
    return std::optional<bool>(!strictly);
  }
  if (name == "in") {
    ASSIGN_OR_RETURN(Value seq, Arg(args, name));
    return Contains(seq, v);
  }
  if (name == "sameas") {
    ASSIGN_OR_RETURN(Value other, Arg(args, name));
    // Python's `is`: CPython shares small ints; constants and strings are
    // equal objects in the cases templates compare.
    bool same = (v.kind() == K::kInt && other.kind() == K::kInt && v.int_value() == other.int_value() &&
                 v.int_value() >= -5 && v.int_value() <= 256) ||
                (v.is_string() && other.is_string() && v.str() == other.str()) ||
                (v.is_none() && other.is_none()) ||
                (v.kind() == K::kBool && other.kind() == K::kBool && v.bool_value() == other.bool_value()) ||
                (v.is_mapping() && other.is_mapping() && &v.dict() == &other.dict()) ||
                (v.is_list() && other.is_list() && &v.list() == &other.list());
    return std::optional<bool>(same);
  }
  if (name == "filter") return std::optional<bool>(v.is_string() && IsJinjaFilter(v.str()));
  if (name == "test") return std::optional<bool>(v.is_string() && IsJinjaTest(v.str()));
  (void)ev;
  return std::optional<bool>();
}

}  // namespace kvfleet::jinja
