// The expression half of the parser (parser_internal.h): jinja2's
// precedence from `a if b else c` down to primaries, postfixes, filters and
// tests.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/parser_internal.h"

namespace kvfleet::jinja::internal {

void Parser::Advance() {
  if (pos_ + 1 < tokens_.size()) ++pos_;
}

bool Parser::SkipOp(std::string_view op) {
  if (!AtOp(op)) return false;
  Advance();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!AtName(name)) return false;
  Advance();
  return true;
}

bool Parser::AtTupleEnd(std::initializer_list<std::string_view> extra_ends) const {
  if (At(T::kVariableEnd) || At(T::kBlockEnd) || AtOp(")") || At(T::kEnd)) return true;
  for (std::string_view end : extra_ends) {
    if (AtName(end)) return true;
  }
  return false;
}

absl::StatusOr<ExprPtr> Parser::ParseTuple(bool with_condition, std::initializer_list<std::string_view> extra_ends) {
  int line = Cur().line;
  std::vector<ExprPtr> items;
  bool saw_comma = false;
  while (true) {
    if (!items.empty()) {
      if (!SkipOp(",")) break;
      saw_comma = true;
    }
    if (AtTupleEnd(extra_ends)) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condition));
    items.push_back(std::move(item));
  }
  if (!saw_comma) {
    if (items.empty()) return Fail(absl::StrCat("expected an expression, got ", Describe()));
    return std::move(items[0]);
  }
  ExprPtr tuple = Node(Expr::Kind::kTuple, line);
  tuple->operands = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condition) {
  if (!with_condition) return ParseOr();
  int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (SkipName("if")) {
    ExprPtr cond = Node(Expr::Kind::kCondition, line);
    ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr otherwise;
    if (SkipName("else")) {
      ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
    }
    cond->operands.push_back(std::move(test));
    cond->operands.push_back(std::move(expr));
    cond->operands.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr Parser::Binary(std::string op, ExprPtr lhs, ExprPtr rhs, int line) {
  ExprPtr e = Node(Expr::Kind::kBinary, line);
  e->name = std::move(op);
  e->operands.push_back(std::move(lhs));
  e->operands.push_back(std::move(rhs));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParseAnd());
  while (AtName("or")) {
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseAnd());
    lhs = Binary("or", std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParseNot());
  while (AtName("and")) {
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseNot());
    lhs = Binary("and", std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (AtName("not")) {
    ExprPtr e = Node(Expr::Kind::kNot, Cur().line);
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    e->operands.push_back(std::move(operand));
    return e;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (At(T::kOperator) && (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" ||
                             Cur().value == "<=" || Cur().value == ">" || Cur().value == ">=")) {
      op = Cur().value;
      Advance();
    } else if (AtName("in")) {
      op = "in";
      Advance();
    } else if (AtName("not") && Peek().type == T::kName && Peek().value == "in") {
      op = "notin";
      Advance();
      Advance();
    } else {
      break;
    }
    if (cmp == nullptr) {
      cmp = Node(Expr::Kind::kCompare, line);
      cmp->operands.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
    cmp->ops.push_back(op);
    cmp->operands.push_back(std::move(rhs));
  }
  return cmp != nullptr ? std::move(cmp) : std::move(first);
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParseConcat());
  while (AtOp("+") || AtOp("-")) {
    std::string op = Cur().value;
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseConcat());
    lhs = Binary(op, std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParseMath2());
  while (AtOp("~")) {
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath2());
    lhs = Binary("~", std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParsePow());
  while (AtOp("*") || AtOp("/") || AtOp("//") || AtOp("%")) {
    std::string op = Cur().value;
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParsePow());
    lhs = Binary(op, std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  ASSIGN_OR_RETURN(ExprPtr lhs, ParseUnary(true));
  while (AtOp("**")) {
    int line = Cur().line;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseUnary(true));
    lhs = Binary("**", std::move(lhs), std::move(rhs), line);
  }
  return lhs;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  ExprPtr node;
  if (AtOp("-") || AtOp("+")) {
    node = Node(AtOp("-") ? Expr::Kind::kNegate : Expr::Kind::kPlus, Cur().line);
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->operands.push_back(std::move(operand));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  int line = Cur().line;
  if (At(T::kName)) {
    const std::string& name = Cur().value;
    ExprPtr e = Node(Expr::Kind::kConstant, line);
    if (name == "true" || name == "True") {
      e->value = Value::Bool(true);
    } else if (name == "false" || name == "False") {
      e->value = Value::Bool(false);
    } else if (name == "none" || name == "None") {
      e->value = Value::None();
    } else {
      e->kind = Expr::Kind::kName;
      e->name = name;
    }
    Advance();
    return e;
  }
  if (At(T::kString)) {
    std::string s;
    while (At(T::kString)) {  // adjacent literals concatenate
      s += Cur().value;
      Advance();
    }
    ExprPtr e = Node(Expr::Kind::kConstant, line);
    e->value = Value::Literal(std::move(s));
    return e;
  }
  if (At(T::kInteger) || At(T::kFloat)) {
    ExprPtr e = Node(Expr::Kind::kConstant, line);
    e->value = At(T::kInteger) ? Value::Int(Cur().integer) : Value::Float(Cur().number);
    Advance();
    return e;
  }
  if (SkipOp("(")) {
    if (SkipOp(")")) {
      ExprPtr e = Node(Expr::Kind::kTuple, line);
      return e;
    }
    ASSIGN_OR_RETURN(ExprPtr inner, ParseTupleInParens(line));
    RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (SkipOp("[")) {
    ExprPtr e = Node(Expr::Kind::kList, line);
    while (!AtOp("]")) {
      if (!e->operands.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (AtOp("]")) break;
      ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      e->operands.push_back(std::move(item));
    }
    Advance();
    return e;
  }
  if (SkipOp("{")) {
    ExprPtr e = Node(Expr::Kind::kDict, line);
    while (!AtOp("}")) {
      if (!e->operands.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (AtOp("}")) break;
      ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      RETURN_IF_ERROR(ExpectOp(":"));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      e->operands.push_back(std::move(key));
      e->operands.push_back(std::move(value));
    }
    Advance();
    return e;
  }
  return Fail(absl::StrCat("unexpected ", Describe()));
}

absl::StatusOr<ExprPtr> Parser::ParseTupleInParens(int line) {
  ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(true));
  if (!AtOp(",")) return first;
  ExprPtr tuple = Node(Expr::Kind::kTuple, line);
  tuple->operands.push_back(std::move(first));
  while (SkipOp(",")) {
    if (AtOp(")")) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    tuple->operands.push_back(std::move(item));
  }
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    int line = Cur().line;
    if (SkipOp(".")) {
      if (At(T::kInteger)) {
        ExprPtr e = Node(Expr::Kind::kGetItem, line);
        ExprPtr index = Node(Expr::Kind::kConstant, line);
        index->value = Value::Int(Cur().integer);
        Advance();
        e->operands.push_back(std::move(node));
        e->operands.push_back(std::move(index));
        node = std::move(e);
        continue;
      }
      ExprPtr e = Node(Expr::Kind::kGetAttr, line);
      ASSIGN_OR_RETURN(e->name, ExpectAnyName());
      e->operands.push_back(std::move(node));
      node = std::move(e);
    } else if (SkipOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node), line));
    } else if (AtOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node, int line) {
  ExprPtr parts[3];
  bool is_slice = false;
  for (int part = 0; part < 3; ++part) {
    if (!AtOp(":") && !AtOp("]")) {
      ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
    }
    if (part < 2 && SkipOp(":")) {
      is_slice = true;
      continue;
    }
    break;
  }
  RETURN_IF_ERROR(ExpectOp("]"));
  ExprPtr e = Node(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, line);
  if (!is_slice && parts[0] == nullptr) return Fail("expected an index inside '[]'");
  e->operands.push_back(std::move(node));
  e->operands.push_back(std::move(parts[0]));
  if (is_slice) {
    e->operands.push_back(std::move(parts[1]));
    e->operands.push_back(std::move(parts[2]));
  }
  return e;
}

absl::Status Parser::ParseArguments(Expr* e) {
  RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!AtOp(")")) {
    if (!first) RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (AtOp(")")) break;
    if (AtOp("*") || AtOp("**")) return Fail("*args and **kwargs in calls are not supported");
    if (At(T::kName) && Peek().type == T::kOperator && Peek().value == "=") {
      std::string name = Cur().value;
      Advance();
      Advance();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      e->keywords.emplace_back(std::move(name), std::move(value));
    } else {
      if (!e->keywords.empty()) return Fail("a positional argument follows a keyword argument");
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      e->operands.push_back(std::move(value));
    }
  }
  Advance();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseCall(ExprPtr callee) {
  ExprPtr e = Node(Expr::Kind::kCall, Cur().line);
  e->operands.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseArguments(e.get()));
  return e;
}

absl::StatusOr<std::string> Parser::ParseDottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
  while (AtOp(".") && Peek().type == T::kName) {
    Advance();
    absl::StrAppend(&name, ".", Cur().value);
    Advance();
  }
  return name;
}

absl::StatusOr<ExprPtr> Parser::ParseFilters(ExprPtr node, bool first_without_pipe) {
  bool first = true;
  while (AtOp("|") || (first && first_without_pipe)) {
    if (!(first && first_without_pipe)) Advance();
    first = false;
    ExprPtr e = Node(Expr::Kind::kFilter, Cur().line);
    ASSIGN_OR_RETURN(e->name, ParseDottedName());
    e->operands.push_back(std::move(node));
    if (AtOp("(")) RETURN_IF_ERROR(ParseArguments(e.get()));
    node = std::move(e);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (AtOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilters(std::move(node)));
    } else if (AtName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (AtOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr node) {
  ExprPtr e = Node(Expr::Kind::kTest, Cur().line);
  Advance();  // "is"
  e->negated = SkipName("not");
  ASSIGN_OR_RETURN(e->name, ParseDottedName());
  e->operands.push_back(std::move(node));
  if (AtOp("(")) {
    RETURN_IF_ERROR(ParseArguments(e.get()));
  } else if ((At(T::kName) || At(T::kString) || At(T::kInteger) || At(T::kFloat) || AtOp("(") || AtOp("[") ||
              AtOp("{")) &&
             !AtName("else") && !AtName("or") && !AtName("and")) {
    if (AtName("is")) return Fail("You cannot chain multiple tests with is");
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->operands.push_back(std::move(arg));
  }
  return e;
}

}  // namespace kvfleet::jinja::internal
