#include "model/jinja/interpreter.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::jinja {
namespace {

absl::Status WithLine(const absl::Status& s, int line) {
  if (s.ok() || absl::StartsWith(s.message(), "line ")) return s;
  return absl::Status(s.code(), absl::StrCat("line ", line, ": ", s.message()));
}

absl::Status RuntimeError(int line, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", std::string(what)));
}

}  // namespace

const Value* Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

absl::Status Interpreter::Run(const Body& body, ScopePtr globals, Text* out) {
  auto top = std::make_shared<Scope>(std::move(globals));
  ASSIGN_OR_RETURN(Flow flow, ExecBody(body, top, out));
  if (flow != Flow::kNormal) return absl::InvalidArgumentError("'break' or 'continue' outside a loop");
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const Body& body, const ScopePtr& scope, Text* out) {
  for (const StmtPtr& s : body) {
    if (--steps_left_ < 0) return RuntimeError(s->line, "the template ran too long (a loop without end?)");
    if (out->size() > kMaxOutputBytes) return RuntimeError(s->line, "the template's output exceeds 64 MiB");
    absl::StatusOr<Flow> flow = Exec(*s, scope, out);
    if (!flow.ok()) return WithLine(flow.status(), s->line);
    if (*flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Stmt& s, const ScopePtr& scope, Text* out) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      out->AppendLiteral(s.text);
      return Flow::kNormal;
    case Stmt::Kind::kPrint: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      out->Append(v.ToText());
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(Value cond, Eval(*s.conditions[i], scope));
        if (cond.Truthy()) return ExecBody(s.bodies[i], scope, out);
      }
      if (s.bodies.size() > s.conditions.size()) return ExecBody(s.bodies.back(), scope, out);
      return Flow::kNormal;
    case Stmt::Kind::kFor:
      return ExecFor(s, scope, out);
    case Stmt::Kind::kSet: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      RETURN_IF_ERROR(Assign(s.targets[0], v, scope, s.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      Text captured;
      ASSIGN_OR_RETURN(Flow flow, ExecBody(s.bodies[0], std::make_shared<Scope>(scope), &captured));
      Value v = Value::String(std::move(captured));
      if (s.expr != nullptr) {
        ASSIGN_OR_RETURN(v, EvalFilterChain(*s.expr, v, scope));
      }
      RETURN_IF_ERROR(Assign(s.targets[0], v, scope, s.line));
      return flow;
    }
    case Stmt::Kind::kMacro:
      scope->Set(s.name, MakeMacro(s, scope, s.name));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      Value caller = MakeMacro(s, scope, "caller");
      ASSIGN_OR_RETURN(Value callee, Eval(*s.expr->operands[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArguments(*s.expr, 1, scope));
      args.keyword.emplace_back("caller", caller);
      ASSIGN_OR_RETURN(Value result, Call(callee, args));
      out->Append(result.ToText());
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      Text captured;
      ASSIGN_OR_RETURN(Flow flow, ExecBody(s.bodies[0], std::make_shared<Scope>(scope), &captured));
      if (s.expr == nullptr) {  // {% generation %}
        out->Append(captured);
        return flow;
      }
      ASSIGN_OR_RETURN(Value v, EvalFilterChain(*s.expr, Value::String(std::move(captured)), scope));
      out->Append(v.ToText());
      return flow;
    }
    case Stmt::Kind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (size_t i = 0; i < s.targets.size(); ++i) {
        ASSIGN_OR_RETURN(Value v, Eval(*s.conditions[i], scope));
        RETURN_IF_ERROR(Assign(s.targets[i], v, inner, s.line));
      }
      return ExecBody(s.bodies[0], inner, out);
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope, Text* out) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, scope));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  return RunLoop(s, scope, std::move(items), 1, out);
}

absl::StatusOr<Interpreter::Flow> Interpreter::RunLoop(const Stmt& s, const ScopePtr& scope, std::vector<Value> items,
                                                       int loop_depth, Text* out) {
  if (++depth_ > kMaxDepth) return RuntimeError(s.line, "loops and macro calls nest too deeply");
  struct DepthGuard {
    int* depth;
    ~DepthGuard() { --*depth; }
  } guard{&depth_};
  if (!s.conditions.empty()) {  // {% for x in xs if cond %}: filtered before loop.* counts
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(Assign(s.targets[0], item, probe, s.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*s.conditions[0], probe));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (s.bodies.size() > 1) return ExecBody(s.bodies[1], std::make_shared<Scope>(scope), out);
    return Flow::kNormal;
  }
  auto last_changed = std::make_shared<std::optional<Value>>();
  for (int64_t i = 0; i < static_cast<int64_t>(items.size()); ++i) {
    if (--steps_left_ < 0) return RuntimeError(s.line, "the template ran too long (a loop without end?)");
    auto iteration = std::make_shared<Scope>(scope);
    RETURN_IF_ERROR(Assign(s.targets[0], items[i], iteration, s.line));
    // loop.changed(...) remembers its last arguments across iterations.
    Value changed = Value::Function("changed", [last_changed](const CallArgs& args) -> absl::StatusOr<Value> {
      Value now = Value::List(args.positional, true);
      bool differs = !last_changed->has_value() || !(*last_changed)->Equals(now);
      *last_changed = now;
      return Value::Bool(differs);
    });
    iteration->Set("loop", MakeLoopObject(s, scope, items, i, loop_depth, std::move(changed)));
    ASSIGN_OR_RETURN(Flow flow, ExecBody(s.bodies[0], iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interpreter::MakeLoopObject(const Stmt& s, const ScopePtr& scope, const std::vector<Value>& items, int64_t i,
                                  int loop_depth, Value changed) {
  const int64_t n = static_cast<int64_t>(items.size());
  DictData loop;
  auto set = [&](std::string_view key, Value v) { loop.Set(Value::Literal(std::string(key)), std::move(v)); };
  set("index", Value::Int(i + 1));
  set("index0", Value::Int(i));
  set("revindex", Value::Int(n - i));
  set("revindex0", Value::Int(n - i - 1));
  set("first", Value::Bool(i == 0));
  set("last", Value::Bool(i == n - 1));
  set("length", Value::Int(n));
  set("depth", Value::Int(loop_depth));
  set("depth0", Value::Int(loop_depth - 1));
  set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
  set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
  set("cycle", Value::Function("cycle", [i](const CallArgs& args) -> absl::StatusOr<Value> {
        if (args.positional.empty()) return absl::InvalidArgumentError("TypeError: no items for cycling given");
        return args.positional[i % args.positional.size()];
      }));
  set("changed", std::move(changed));
  // Calling loop(children) in a recursive loop renders the loop again, one level deeper.
  const Stmt* stmt = &s;
  return Value::Function(
      "loop",
      [this, stmt, scope, loop_depth](const CallArgs& args) -> absl::StatusOr<Value> {
        if (!stmt->recursive) {
          return absl::InvalidArgumentError("TypeError: Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
        }
        if (args.positional.size() != 1) return absl::InvalidArgumentError("TypeError: loop() takes one iterable");
        ASSIGN_OR_RETURN(std::vector<Value> children, Iterate(args.positional[0]));
        Text text;
        ASSIGN_OR_RETURN(Flow flow, RunLoop(*stmt, scope, std::move(children), loop_depth + 1, &text));
        (void)flow;
        return Value::String(std::move(text));
      },
      std::move(loop));
}

absl::Status Interpreter::Assign(const Target& target, const Value& value, const ScopePtr& scope, int line) {
  if (!target.attribute.empty()) {
    const Value* ns = scope->Lookup(target.names[0]);
    if (ns == nullptr || ns->kind() != Value::Kind::kNamespace) {
      return RuntimeError(line, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
    }
    ns->namespace_dict().Set(Value::Literal(target.attribute), value);
    return absl::OkStatus();
  }
  if (!target.is_tuple) {
    scope->Set(target.names[0], value);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::vector<Value> parts, Iterate(value));
  if (parts.size() != target.names.size()) {
    return RuntimeError(line, absl::StrCat("ValueError: ", parts.size() < target.names.size() ? "not enough" : "too many",
                                           " values to unpack (expected ", target.names.size(), ")"));
  }
  for (size_t i = 0; i < parts.size(); ++i) scope->Set(target.names[i], parts[i]);
  return absl::OkStatus();
}

Value Interpreter::MakeMacro(const Stmt& s, const ScopePtr& scope, std::string name) {
  const Stmt* stmt = &s;
  // Weak: the macro is stored in the scope it closes over, and a strong
  // reference would make a cycle that outlives the render.
  std::weak_ptr<Scope> defined_in = scope;
  return Value::Function(std::move(name), [this, stmt, defined_in](const CallArgs& args) -> absl::StatusOr<Value> {
    ScopePtr scope = defined_in.lock();
    if (scope == nullptr) return RuntimeError(stmt->line, "a macro was called after the block defining it ended");
    return CallMacro(*stmt, scope, args);
  });
}

namespace {

void FindNames(const Expr* e, bool* varargs, bool* kwargs) {
  if (e == nullptr) return;
  if (e->kind == Expr::Kind::kName) {
    *varargs |= e->name == "varargs";
    *kwargs |= e->name == "kwargs";
  }
  for (const ExprPtr& op : e->operands) FindNames(op.get(), varargs, kwargs);
  for (const auto& [name, kw] : e->keywords) FindNames(kw.get(), varargs, kwargs);
}

void FindNames(const Body& body, bool* varargs, bool* kwargs) {
  for (const StmtPtr& s : body) {
    FindNames(s->expr.get(), varargs, kwargs);
    for (const ExprPtr& c : s->conditions) FindNames(c.get(), varargs, kwargs);
    for (const MacroParam& p : s->params) FindNames(p.default_value.get(), varargs, kwargs);
    for (const Body& b : s->bodies) FindNames(b, varargs, kwargs);
  }
}

}  // namespace

std::pair<bool, bool> Interpreter::MacroUses(const Stmt& s) {
  auto it = macro_uses_.find(&s);
  if (it != macro_uses_.end()) return it->second;
  bool varargs = false, kwargs = false;
  FindNames(s.bodies[0], &varargs, &kwargs);
  return macro_uses_[&s] = {varargs, kwargs};
}

absl::StatusOr<Value> Interpreter::CallMacro(const Stmt& s, const ScopePtr& defined_in, const CallArgs& args) {
  if (++depth_ > kMaxDepth) return RuntimeError(s.line, "loops and macro calls nest too deeply");
  struct DepthGuard {
    int* depth;
    ~DepthGuard() { --*depth; }
  } guard{&depth_};
  auto scope = std::make_shared<Scope>(defined_in);
  std::vector<bool> keyword_used(args.keyword.size(), false);
  for (size_t i = 0; i < s.params.size(); ++i) {
    const MacroParam& p = s.params[i];
    std::optional<Value> v;
    if (i < args.positional.size()) v = args.positional[i];
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (args.keyword[k].first == p.name) {
        v = args.keyword[k].second;
        keyword_used[k] = true;
      }
    }
    if (!v.has_value() && p.default_value != nullptr) {
      ASSIGN_OR_RETURN(v, Eval(*p.default_value, scope));
    }
    scope->Set(p.name, v.has_value() ? *v : Value::Undefined(absl::StrCat("parameter '", p.name, "' was not provided")));
  }
  auto [uses_varargs, uses_kwargs] = MacroUses(s);
  if (args.positional.size() > s.params.size() && !uses_varargs) {
    return absl::InvalidArgumentError(absl::StrCat("TypeError: macro '", s.name, "' takes not more than ",
                                                   s.params.size(), " argument(s)"));
  }
  std::vector<Value> varargs;
  for (size_t i = s.params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  scope->Set("varargs", Value::List(std::move(varargs), /*is_tuple=*/true));
  DictData kwargs;
  for (size_t k = 0; k < args.keyword.size(); ++k) {
    if (keyword_used[k]) continue;
    if (args.keyword[k].first == "caller") {
      scope->Set("caller", args.keyword[k].second);
    } else if (!uses_kwargs) {
      return absl::InvalidArgumentError(absl::StrCat("TypeError: macro '", s.name, "' takes no keyword argument '",
                                                     args.keyword[k].first, "'"));
    } else {
      kwargs.Set(Value::Literal(args.keyword[k].first), args.keyword[k].second);
    }
  }
  scope->Set("kwargs", Value::Dict(std::move(kwargs)));
  Text out;
  ASSIGN_OR_RETURN(Flow flow, ExecBody(s.bodies[0], scope, &out));
  (void)flow;
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_callable()) {
    return absl::InvalidArgumentError(absl::StrCat("TypeError: '", callee.TypeName(), "' object is not callable"));
  }
  return callee.function().call(args);
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  absl::StatusOr<Value> v = EvalInner(e, scope);
  if (!v.ok()) return WithLine(v.status(), e.line);
  return v;
}

absl::StatusOr<CallArgs> Interpreter::EvalArguments(const Expr& e, size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first; i < e.operands.size(); ++i) {
    ASSIGN_OR_RETURN(Value v, Eval(*e.operands[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.keywords) {
    ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalCompare(const Expr& e, const ScopePtr& scope) {
  ASSIGN_OR_RETURN(Value left, Eval(*e.operands[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*e.operands[i + 1], scope));
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==" || op == "!=") {
      result = left.Equals(right) == (op == "==");
    } else if (op == "in" || op == "notin") {
      ASSIGN_OR_RETURN(bool in, Contains(right, left));
      result = in == (op == "in");
    } else {
      if (left.is_undefined()) return UndefinedError(left);
      if (right.is_undefined()) return UndefinedError(right);
      if (op == "<") {
        ASSIGN_OR_RETURN(result, LessThan(left, right));
      } else if (op == ">") {
        ASSIGN_OR_RETURN(result, LessThan(right, left));
      } else if (op == "<=") {
        ASSIGN_OR_RETURN(bool greater, LessThan(right, left));
        result = !greater;
      } else {
        ASSIGN_OR_RETURN(bool less, LessThan(left, right));
        result = !less;
      }
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Interpreter::EvalFilterChain(const Expr& e, const Value& input, const ScopePtr& scope) {
  if (e.kind != Expr::Kind::kFilter) return Eval(e, scope);
  Value base = input;
  if (e.operands[0] != nullptr) {
    ASSIGN_OR_RETURN(base, EvalFilterChain(*e.operands[0], input, scope));
  }
  ASSIGN_OR_RETURN(CallArgs args, EvalArguments(e, 1, scope));
  absl::StatusOr<Value> v = ApplyFilter(e.name, base, args);
  if (!v.ok()) return WithLine(v.status(), e.line);
  return v;
}

absl::StatusOr<Value> Interpreter::ApplyFilter(std::string_view name, const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(std::optional<Value> v, CallFilter(*this, name, input, args));
  if (!v.has_value()) {
    if (IsJinjaFilter(name)) return absl::InvalidArgumentError(absl::StrCat("the filter '", std::string(name), "' is not supported"));
    return absl::InvalidArgumentError(absl::StrCat("TemplateRuntimeError: No filter named '", std::string(name), "' found."));
  }
  return *std::move(v);
}

absl::StatusOr<bool> Interpreter::ApplyTest(std::string_view name, const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(std::optional<bool> v, CallTest(*this, name, input, args));
  if (!v.has_value()) return absl::InvalidArgumentError(absl::StrCat("TemplateRuntimeError: No test named '", std::string(name), "' found."));
  return *v;
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Kind::kConstant:
      return e.value;
    case Expr::Kind::kName: {
      const Value* v = scope->Lookup(e.name);
      if (v == nullptr) return Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
      return *v;
    }
    case Expr::Kind::kGetAttr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.operands[0], scope));
      return GetAttribute(obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.operands[0], scope));
      ASSIGN_OR_RETURN(Value key, Eval(*e.operands[1], scope));
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.operands[0], scope));
      Value bounds[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (e.operands[i + 1] != nullptr) {
          ASSIGN_OR_RETURN(bounds[i], Eval(*e.operands[i + 1], scope));
        }
      }
      return GetSlice(obj, bounds[0], bounds[1], bounds[2]);
    }
    case Expr::Kind::kCall: {
      ASSIGN_OR_RETURN(Value callee, Eval(*e.operands[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArguments(e, 1, scope));
      return Call(callee, args);
    }
    case Expr::Kind::kFilter:
      return EvalFilterChain(e, Value(), scope);
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(Value subject, Eval(*e.operands[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArguments(e, 1, scope));
      ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, subject, args));
      return Value::Bool(result != e.negated);
    }
    case Expr::Kind::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.operands[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kNegate:
    case Expr::Kind::kPlus: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.operands[0], scope));
      if (v.is_undefined()) return UndefinedError(v);
      bool negate = e.kind == Expr::Kind::kNegate;
      if (v.is_integer()) return Value::Int(negate ? -v.int_value() : v.int_value());
      if (v.is_number()) return Value::Float(negate ? -v.number_value() : v.number_value());
      return absl::InvalidArgumentError(
          absl::StrCat("TypeError: bad operand type for unary ", negate ? "-" : "+", ": '", v.TypeName(), "'"));
    }
    case Expr::Kind::kBinary: {
      ASSIGN_OR_RETURN(Value left, Eval(*e.operands[0], scope));
      if (e.name == "and") return left.Truthy() ? Eval(*e.operands[1], scope) : left;
      if (e.name == "or") return left.Truthy() ? left : Eval(*e.operands[1], scope);
      ASSIGN_OR_RETURN(Value right, Eval(*e.operands[1], scope));
      return BinaryOp(e.name, left, right);
    }
    case Expr::Kind::kCompare:
      return EvalCompare(e, scope);
    case Expr::Kind::kCondition: {
      ASSIGN_OR_RETURN(Value test, Eval(*e.operands[0], scope));
      if (test.Truthy()) return Eval(*e.operands[1], scope);
      if (e.operands[2] != nullptr) return Eval(*e.operands[2], scope);
      return Value::Undefined(absl::StrCat("the inline if-expression on line ", e.line,
                                           " evaluated to false and no else section was defined."));
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& item : e.operands) {
        ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
        ASSIGN_OR_RETURN(Value k, Eval(*e.operands[i], scope));
        ASSIGN_OR_RETURN(Value v, Eval(*e.operands[i + 1], scope));
        d.Set(std::move(k), std::move(v));
      }
      return Value::Dict(std::move(d));
    }
  }
  return absl::InternalError("unknown expression");
}

}  // namespace kvfleet::jinja
