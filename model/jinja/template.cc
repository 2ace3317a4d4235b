#include "model/jinja/template.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/interpreter.h"
#include "model/jinja/lexer.h"
#include "model/jinja/parser.h"

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

absl::Status CheckExpr(const Expr* e) {
  if (e == nullptr) return absl::OkStatus();
  if (e->kind == Expr::Kind::kFilter && !IsJinjaFilter(e->name)) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e->line, ": No filter named '", e->name, "'."));
  }
  if (e->kind == Expr::Kind::kTest && !IsJinjaTest(e->name)) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e->line, ": No test named '", e->name, "'."));
  }
  for (const ExprPtr& op : e->operands) RETURN_IF_ERROR(CheckExpr(op.get()));
  for (const auto& [name, kw] : e->keywords) RETURN_IF_ERROR(CheckExpr(kw.get()));
  return absl::OkStatus();
}

// jinja2 resolves filter and test names when it compiles a template, so an
// unknown one fails the whole template even in a branch never taken.
absl::Status CheckNames(const Body& body) {
  for (const StmtPtr& s : body) {
    RETURN_IF_ERROR(CheckExpr(s->expr.get()));
    for (const ExprPtr& c : s->conditions) RETURN_IF_ERROR(CheckExpr(c.get()));
    for (const MacroParam& p : s->params) RETURN_IF_ERROR(CheckExpr(p.default_value.get()));
    for (const Body& b : s->bodies) RETURN_IF_ERROR(CheckNames(b));
  }
  return absl::OkStatus();
}

absl::Status Named(const absl::Status& s, std::string_view name) {
  return absl::Status(s.code(), absl::StrCat("template '", std::string(name), "', ", s.message()));
}

}  // namespace

bool IsJinjaFilter(std::string_view name) {
  return std::find(std::begin(kJinjaFilters), std::end(kJinjaFilters), name) != std::end(kJinjaFilters);
}

bool IsJinjaTest(std::string_view name) {
  return std::find(std::begin(kJinjaTests), std::end(kJinjaTests), name) != std::end(kJinjaTests);
}

absl::StatusOr<Template> Template::Parse(std::string_view source, std::string name) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return Named(tokens.status(), name);
  absl::StatusOr<Body> body = jinja::Parse(*tokens);
  if (!body.ok()) return Named(body.status(), name);
  if (absl::Status s = CheckNames(*body); !s.ok()) return Named(s, name);
  Template t;
  t.name_ = std::move(name);
  t.body_ = std::make_shared<const Body>(*std::move(body));
  return t;
}

absl::StatusOr<Text> Template::Render(const DictData& variables, const RenderOptions& options) const {
  GlobalsOptions globals_options;
  globals_options.now = options.now != 0 ? options.now : std::time(nullptr);
  auto globals = std::make_shared<Scope>(nullptr);
  for (const auto& [k, v] : MakeGlobals(globals_options).entries) globals->Set(k.str(), v);
  auto inputs = std::make_shared<Scope>(globals);
  for (const auto& [k, v] : variables.entries) {
    if (k.is_string()) inputs->Set(k.str(), v);
  }
  Text out;
  Interpreter interpreter;
  if (absl::Status s = interpreter.Run(*body_, inputs, &out); !s.ok()) return Named(s, name_);
  return out;
}

}  // namespace kvfleet::jinja
