#include "model/jinja/template.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/builtins.h"
#include "model/jinja/interpreter.h"
#include "model/jinja/lexer.h"
#include "model/jinja/parser.h"

namespace kvfleet::jinja {
namespace {

// `soft`: inside an if body or a conditional expression's branch, where
// jinja2 defers an unknown name to a runtime error.
absl::Status CheckExpr(const Expr* e, bool soft) {
  if (e == nullptr || soft) return absl::OkStatus();
  if (e->kind == Expr::Kind::kCondition) return CheckExpr(e->operands[0].get(), soft);
  if (e->kind == Expr::Kind::kFilter && !IsJinjaFilter(e->name)) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e->line, ": No filter named '", e->name, "'."));
  }
  if (e->kind == Expr::Kind::kTest && !IsJinjaTest(e->name)) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e->line, ": No test named '", e->name, "'."));
  }
  for (const ExprPtr& op : e->operands) RETURN_IF_ERROR(CheckExpr(op.get(), soft));
  for (const auto& [name, kw] : e->keywords) RETURN_IF_ERROR(CheckExpr(kw.get(), soft));
  return absl::OkStatus();
}

// jinja2 resolves filter and test names when it compiles a template, so an
// unknown one fails the whole template, unless it sits where code runs
// conditionally (an if body, a branch of `a if b else c`): there it fails
// only when run.
absl::Status CheckNames(const Body& body, bool soft) {
  for (const StmtPtr& s : body) {
    RETURN_IF_ERROR(CheckExpr(s->expr.get(), soft));
    for (const ExprPtr& c : s->conditions) RETURN_IF_ERROR(CheckExpr(c.get(), soft));
    for (const MacroParam& p : s->params) RETURN_IF_ERROR(CheckExpr(p.default_value.get(), soft));
    for (const Body& b : s->bodies) RETURN_IF_ERROR(CheckNames(b, soft || s->kind == Stmt::Kind::kIf));
  }
  return absl::OkStatus();
}

absl::Status Named(const absl::Status& s, std::string_view name) {
  return absl::Status(s.code(), absl::StrCat("template '", std::string(name), "', ", s.message()));
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source, std::string name) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return Named(tokens.status(), name);
  absl::StatusOr<Body> body = jinja::Parse(*tokens);
  if (!body.ok()) return Named(body.status(), name);
  if (absl::Status s = CheckNames(*body, false); !s.ok()) return Named(s, name);
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
  Interpreter interpreter(options.max_steps);
  if (absl::Status s = interpreter.Run(*body_, inputs, &out); !s.ok()) return Named(s, name_);
  return out;
}

}  // namespace kvfleet::jinja
