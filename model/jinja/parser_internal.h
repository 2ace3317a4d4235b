// The parser's state and methods, shared by its two halves: statements
// (parser.cc) and expressions (expression_parser.cc). Internal to the
// engine; parser.h is the interface.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace kvfleet::jinja::internal {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<Body> ParseTemplate();

 private:
  // --- token helpers ---
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool At(T type) const { return Cur().type == type; }
  bool AtOp(std::string_view op) const { return At(T::kOperator) && Cur().value == op; }
  bool AtName(std::string_view name) const { return At(T::kName) && Cur().value == name; }
  void Advance();
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);

  absl::Status Fail(std::string_view what) const;
  std::string Describe() const;
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectName(std::string_view name);
  absl::StatusOr<std::string> ExpectAnyName();
  absl::Status ExpectBlockEnd();

  ExprPtr Node(Expr::Kind kind, int line);

  // --- statements ---

  // Statements until a block tag whose first name is in `end_names` (left
  // unconsumed, after its "{%") or the end of the template.
  absl::StatusOr<Body> Subparse(std::initializer_list<std::string_view> end_names);

  absl::StatusOr<StmtPtr> ParseStatement(std::initializer_list<std::string_view> open_ends);

  absl::StatusOr<Body> BodyUntil(std::initializer_list<std::string_view> ends) { return Subparse(ends); }
  // At "{% name" (after the "{%"): consumes "name %}".
  absl::Status CloseBlock(std::string_view name);

  absl::Status ParseIf(Stmt* s);

  absl::Status ParseFor(Stmt* s);

  absl::Status ParseSet(Stmt* s);

  absl::Status ParseMacro(Stmt* s);

  absl::Status ParseSignature(Stmt* s);

  absl::Status ParseCallBlock(Stmt* s);

  absl::Status ParseFilterBlock(Stmt* s);

  absl::Status ParseWith(Stmt* s);

  absl::StatusOr<Target> ParseAssignTarget(bool allow_attribute);

  // --- expressions ---

  bool AtTupleEnd(std::initializer_list<std::string_view> extra_ends) const;

  // Comma-separated expressions; a tuple when there is a comma.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition, std::initializer_list<std::string_view> extra_ends);

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition);

  ExprPtr Binary(std::string op, ExprPtr lhs, ExprPtr rhs, int line);

  absl::StatusOr<ExprPtr> ParseOr();

  absl::StatusOr<ExprPtr> ParseAnd();

  absl::StatusOr<ExprPtr> ParseNot();

  absl::StatusOr<ExprPtr> ParseCompare();

  absl::StatusOr<ExprPtr> ParseMath1();

  absl::StatusOr<ExprPtr> ParseConcat();

  absl::StatusOr<ExprPtr> ParseMath2();

  absl::StatusOr<ExprPtr> ParsePow();

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);

  absl::StatusOr<ExprPtr> ParsePrimary();

  // Inside "( ... )": an expression, or a tuple when there is a comma.
  absl::StatusOr<ExprPtr> ParseTupleInParens(int line);

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);

  // After "[": an index or a slice, then "]".
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line);

  // At "(": positional and keyword arguments into `e` (operands after the first).
  absl::Status ParseArguments(Expr* e);

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);

  absl::StatusOr<std::string> ParseDottedName();

  // `node | f(...) | g`; node may be null (a filter block or set block).
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool first_without_pipe = false);

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};


}  // namespace kvfleet::jinja::internal
