// Runs parsed statements (ast.h) against variables and writes the output,
// with jinja2's scoping: a for loop's body gets a fresh scope each
// iteration (what it sets is gone after it; namespace() objects are how
// templates carry state out), macros get their own scope over the one they
// were defined in, and `if` adds none.
//
// Errors (jinja2's exceptions: UndefinedError, TypeError, TemplateError from
// raise_exception, ...) come back as INVALID_ARGUMENT "line N: Kind: what".
//
// Thread-safety: one Interpreter per render.
//
//   Interpreter interp(globals);
//   RETURN_IF_ERROR(interp.Run(body, variables, &out));
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "model/jinja/ast.h"
#include "model/jinja/builtins.h"

namespace kvfleet::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* Lookup(const std::string& name) const;
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  std::shared_ptr<Scope> parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter : public Evaluator {
 public:
  // Loops and macro calls nest at most this deep (jinja2 has Python's
  // recursion limit; a template must not exhaust the server's stack).
  static constexpr int kMaxDepth = 200;
  static constexpr size_t kMaxOutputBytes = 64 << 20;

  explicit Interpreter(int64_t max_steps) : steps_left_(max_steps) {}
  // Renders `body` with `globals` as the outermost scope.
  absl::Status Run(const Body& body, ScopePtr globals, Text* out);

  absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args) override;
  absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args) override;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> ExecBody(const Body& body, const ScopePtr& scope, Text* out);
  absl::StatusOr<Flow> Exec(const Stmt& s, const ScopePtr& scope, Text* out);
  absl::StatusOr<Flow> ExecFor(const Stmt& s, const ScopePtr& scope, Text* out);
  // One (possibly recursive, depth >= 1) run of a for loop over `items`.
  absl::StatusOr<Flow> RunLoop(const Stmt& s, const ScopePtr& scope, std::vector<Value> items, int loop_depth,
                               Text* out);
  Value MakeLoopObject(const Stmt& s, const ScopePtr& scope, const std::vector<Value>& items, int64_t i,
                       int loop_depth, Value changed);
  absl::Status Assign(const Target& target, const Value& value, const ScopePtr& scope, int line);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope, std::string name);
  absl::StatusOr<Value> CallMacro(const Stmt& s, const ScopePtr& defined_in, const CallArgs& args);
  std::pair<bool, bool> MacroUses(const Stmt& s);

  absl::StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope);
  absl::StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope);
  absl::StatusOr<CallArgs> EvalArguments(const Expr& e, size_t first, const ScopePtr& scope);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const ScopePtr& scope);
  // A filter expression with `input` in place of its innermost operand when
  // that operand is null (filter blocks, set blocks).
  absl::StatusOr<Value> EvalFilterChain(const Expr& e, const Value& input, const ScopePtr& scope);
  absl::StatusOr<Value> Call(const Value& callee, const CallArgs& args);

  int depth_ = 0;
  int64_t steps_left_;
  // Per macro: whether its body reads varargs / kwargs (jinja2 refuses
  // extra arguments to a macro that does not).
  absl::flat_hash_map<const Stmt*, std::pair<bool, bool>> macro_uses_;
};

}  // namespace kvfleet::jinja
