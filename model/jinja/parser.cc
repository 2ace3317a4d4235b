#include "model/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::jinja {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<Body> ParseTemplate() {
    ASSIGN_OR_RETURN(Body body, Subparse({}));
    if (!At(T::kEnd)) return Fail("unexpected tag '" + Cur().value + "'");
    return body;
  }

 private:
  // --- token helpers ---
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool At(T type) const { return Cur().type == type; }
  bool AtOp(std::string_view op) const { return At(T::kOperator) && Cur().value == op; }
  bool AtName(std::string_view name) const { return At(T::kName) && Cur().value == name; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool SkipOp(std::string_view op) {
    if (!AtOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!AtName(name)) return false;
    Advance();
    return true;
  }

  absl::Status Fail(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", Cur().line, ": ", std::string(what)));
  }
  std::string Describe() const {
    switch (Cur().type) {
      case T::kEnd:
        return "end of template";
      case T::kBlockEnd:
        return "end of statement block";
      case T::kVariableEnd:
        return "end of print statement";
      case T::kData:
        return "template data";
      default:
        return "'" + Cur().value + "'";
    }
  }
  absl::Status ExpectOp(std::string_view op) {
    if (SkipOp(op)) return absl::OkStatus();
    return Fail(absl::StrCat("expected '", std::string(op), "', got ", Describe()));
  }
  absl::Status ExpectName(std::string_view name) {
    if (SkipName(name)) return absl::OkStatus();
    return Fail(absl::StrCat("expected '", std::string(name), "', got ", Describe()));
  }
  absl::StatusOr<std::string> ExpectAnyName() {
    if (!At(T::kName)) return Fail(absl::StrCat("expected a name, got ", Describe()));
    std::string name = Cur().value;
    Advance();
    return name;
  }
  absl::Status ExpectBlockEnd() {
    if (At(T::kBlockEnd)) {
      Advance();
      return absl::OkStatus();
    }
    return Fail(absl::StrCat("expected end of statement block, got ", Describe()));
  }

  ExprPtr Node(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // --- statements ---

  // Statements until a block tag whose first name is in `end_names` (left
  // unconsumed, after its "{%") or the end of the template.
  absl::StatusOr<Body> Subparse(std::initializer_list<std::string_view> end_names) {
    Body body;
    while (!At(T::kEnd)) {
      if (At(T::kData)) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = Cur().line;
        s->text = Cur().value;
        body.push_back(std::move(s));
        Advance();
      } else if (At(T::kVariableBegin)) {
        Advance();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kPrint;
        s->line = Cur().line;
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}));
        if (!At(T::kVariableEnd)) return Fail(absl::StrCat("expected end of print statement, got ", Describe()));
        Advance();
        body.push_back(std::move(s));
      } else if (At(T::kBlockBegin)) {
        Advance();
        for (std::string_view end : end_names) {
          if (AtName(end)) return body;
        }
        ASSIGN_OR_RETURN(StmtPtr s, ParseStatement(end_names));
        if (s != nullptr) body.push_back(std::move(s));
      } else {
        return Fail(absl::StrCat("unexpected ", Describe()));
      }
    }
    if (end_names.size() > 0) {
      return Fail(absl::StrCat("unexpected end of template: a block is not closed (expected '",
                               std::string(*end_names.begin()), "')"));
    }
    return body;
  }

  absl::StatusOr<StmtPtr> ParseStatement(std::initializer_list<std::string_view> open_ends) {
    if (!At(T::kName)) return Fail("tag name expected");
    std::string tag = Cur().value;
    int line = Cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    Advance();
    if (tag == "if") {
      RETURN_IF_ERROR(ParseIf(s.get()));
    } else if (tag == "for") {
      RETURN_IF_ERROR(ParseFor(s.get()));
    } else if (tag == "set") {
      RETURN_IF_ERROR(ParseSet(s.get()));
    } else if (tag == "macro") {
      RETURN_IF_ERROR(ParseMacro(s.get()));
    } else if (tag == "call") {
      RETURN_IF_ERROR(ParseCallBlock(s.get()));
    } else if (tag == "filter") {
      RETURN_IF_ERROR(ParseFilterBlock(s.get()));
    } else if (tag == "with") {
      RETURN_IF_ERROR(ParseWith(s.get()));
    } else if (tag == "generation") {
      // Hugging Face's marker for assistant text: renders its body.
      RETURN_IF_ERROR(ExpectBlockEnd());
      s->kind = Stmt::Kind::kFilterBlock;
      ASSIGN_OR_RETURN(Body body, BodyUntil({"endgeneration"}));
      s->bodies.push_back(std::move(body));
      RETURN_IF_ERROR(CloseBlock("endgeneration"));
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "include" || tag == "extends" || tag == "import" || tag == "from" || tag == "block") {
      return Fail(absl::StrCat("'", tag, "' needs other template files, which a chat template does not have"));
    } else {
      std::string expected;
      for (std::string_view end : open_ends) absl::StrAppend(&expected, expected.empty() ? "" : " or ", "'", std::string(end), "'");
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line, ": encountered unknown tag '", tag, "'",
          expected.empty() ? "" : absl::StrCat("; the innermost block that needs closing expects ", expected)));
    }
    return s;
  }

  absl::StatusOr<Body> BodyUntil(std::initializer_list<std::string_view> ends) { return Subparse(ends); }
  // At "{% name" (after the "{%"): consumes "name %}".
  absl::Status CloseBlock(std::string_view name) {
    RETURN_IF_ERROR(ExpectName(name));
    return ExpectBlockEnd();
  }

  absl::Status ParseIf(Stmt* s) {
    s->kind = Stmt::Kind::kIf;
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, {}));
      s->conditions.push_back(std::move(cond));
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, BodyUntil({"elif", "else", "endif"}));
      s->bodies.push_back(std::move(body));
      if (SkipName("elif")) continue;
      if (SkipName("else")) {
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(Body else_body, BodyUntil({"endif"}));
        s->bodies.push_back(std::move(else_body));
      }
      return CloseBlock("endif");
    }
  }

  absl::Status ParseFor(Stmt* s) {
    s->kind = Stmt::Kind::kFor;
    ASSIGN_OR_RETURN(Target target, ParseAssignTarget(false));
    s->targets.push_back(std::move(target));
    RETURN_IF_ERROR(ExpectName("in"));
    ASSIGN_OR_RETURN(s->expr, ParseTuple(false, {"recursive"}));
    if (SkipName("if")) {
      ASSIGN_OR_RETURN(ExprPtr filter, ParseExpression(true));
      s->conditions.push_back(std::move(filter));
    }
    s->recursive = SkipName("recursive");
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endfor", "else"}));
    s->bodies.push_back(std::move(body));
    if (SkipName("else")) {
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body else_body, BodyUntil({"endfor"}));
      s->bodies.push_back(std::move(else_body));
    }
    return CloseBlock("endfor");
  }

  absl::Status ParseSet(Stmt* s) {
    ASSIGN_OR_RETURN(Target target, ParseAssignTarget(true));
    s->targets.push_back(std::move(target));
    if (SkipOp("=")) {
      s->kind = Stmt::Kind::kSet;
      ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}));
      return ExpectBlockEnd();
    }
    s->kind = Stmt::Kind::kSetBlock;
    if (AtOp("|")) {
      ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr));
    }
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endset"}));
    s->bodies.push_back(std::move(body));
    return CloseBlock("endset");
  }

  absl::Status ParseMacro(Stmt* s) {
    s->kind = Stmt::Kind::kMacro;
    ASSIGN_OR_RETURN(s->name, ExpectAnyName());
    RETURN_IF_ERROR(ParseSignature(s));
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endmacro"}));
    s->bodies.push_back(std::move(body));
    return CloseBlock("endmacro");
  }

  absl::Status ParseSignature(Stmt* s) {
    RETURN_IF_ERROR(ExpectOp("("));
    while (!AtOp(")")) {
      if (!s->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (AtOp(")")) break;
      MacroParam param;
      ASSIGN_OR_RETURN(param.name, ExpectAnyName());
      if (SkipOp("=")) {
        ASSIGN_OR_RETURN(param.default_value, ParseExpression(true));
      } else if (!s->params.empty() && s->params.back().default_value != nullptr) {
        return Fail("a parameter without a default follows one with a default");
      }
      s->params.push_back(std::move(param));
    }
    Advance();
    return absl::OkStatus();
  }

  absl::Status ParseCallBlock(Stmt* s) {
    s->kind = Stmt::Kind::kCallBlock;
    if (AtOp("(")) RETURN_IF_ERROR(ParseSignature(s));
    ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
    if (s->expr->kind != Expr::Kind::kCall) return Fail("expected a call after 'call'");
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endcall"}));
    s->bodies.push_back(std::move(body));
    return CloseBlock("endcall");
  }

  absl::Status ParseFilterBlock(Stmt* s) {
    s->kind = Stmt::Kind::kFilterBlock;
    ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr, /*first_without_pipe=*/true));
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endfilter"}));
    s->bodies.push_back(std::move(body));
    return CloseBlock("endfilter");
  }

  absl::Status ParseWith(Stmt* s) {
    s->kind = Stmt::Kind::kWith;
    while (!At(T::kBlockEnd)) {
      if (!s->targets.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(Target target, ParseAssignTarget(false));
      RETURN_IF_ERROR(ExpectOp("="));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      s->targets.push_back(std::move(target));
      s->conditions.push_back(std::move(value));
    }
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, BodyUntil({"endwith"}));
    s->bodies.push_back(std::move(body));
    return CloseBlock("endwith");
  }

  absl::StatusOr<Target> ParseAssignTarget(bool allow_attribute) {
    Target target;
    bool parenthesized = SkipOp("(");
    ASSIGN_OR_RETURN(std::string first, ExpectAnyName());
    target.names.push_back(first);
    if (allow_attribute && !parenthesized && SkipOp(".")) {
      ASSIGN_OR_RETURN(target.attribute, ExpectAnyName());
      return target;
    }
    while (SkipOp(",")) {
      target.is_tuple = true;
      if (!At(T::kName) || AtName("in")) break;
      ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
      target.names.push_back(name);
    }
    if (parenthesized) {
      target.is_tuple = true;
      RETURN_IF_ERROR(ExpectOp(")"));
    }
    for (const std::string& name : target.names) {
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None") {
        return Fail(absl::StrCat("cannot assign to '", name, "'"));
      }
    }
    return target;
  }

  // --- expressions ---

  bool AtTupleEnd(std::initializer_list<std::string_view> extra_ends) const {
    if (At(T::kVariableEnd) || At(T::kBlockEnd) || AtOp(")") || At(T::kEnd)) return true;
    for (std::string_view end : extra_ends) {
      if (AtName(end)) return true;
    }
    return false;
  }

  // Comma-separated expressions; a tuple when there is a comma.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition, std::initializer_list<std::string_view> extra_ends) {
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

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition) {
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

  ExprPtr Binary(std::string op, ExprPtr lhs, ExprPtr rhs, int line) {
    ExprPtr e = Node(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(std::move(rhs));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ASSIGN_OR_RETURN(ExprPtr lhs, ParseAnd());
    while (AtName("or")) {
      int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr rhs, ParseAnd());
      lhs = Binary("or", std::move(lhs), std::move(rhs), line);
    }
    return lhs;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ASSIGN_OR_RETURN(ExprPtr lhs, ParseNot());
    while (AtName("and")) {
      int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr rhs, ParseNot());
      lhs = Binary("and", std::move(lhs), std::move(rhs), line);
    }
    return lhs;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (AtName("not")) {
      ExprPtr e = Node(Expr::Kind::kNot, Cur().line);
      Advance();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      e->operands.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
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

  absl::StatusOr<ExprPtr> ParseMath1() {
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

  absl::StatusOr<ExprPtr> ParseConcat() {
    ASSIGN_OR_RETURN(ExprPtr lhs, ParseMath2());
    while (AtOp("~")) {
      int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath2());
      lhs = Binary("~", std::move(lhs), std::move(rhs), line);
    }
    return lhs;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
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

  absl::StatusOr<ExprPtr> ParsePow() {
    ASSIGN_OR_RETURN(ExprPtr lhs, ParseUnary(true));
    while (AtOp("**")) {
      int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr rhs, ParseUnary(true));
      lhs = Binary("**", std::move(lhs), std::move(rhs), line);
    }
    return lhs;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
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

  absl::StatusOr<ExprPtr> ParsePrimary() {
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

  // Inside "( ... )": an expression, or a tuple when there is a comma.
  absl::StatusOr<ExprPtr> ParseTupleInParens(int line) {
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

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
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

  // After "[": an index or a slice, then "]".
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line) {
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

  // At "(": positional and keyword arguments into `e` (operands after the first).
  absl::Status ParseArguments(Expr* e) {
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

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr e = Node(Expr::Kind::kCall, Cur().line);
    e->operands.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseArguments(e.get()));
    return e;
  }

  absl::StatusOr<std::string> ParseDottedName() {
    ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    while (AtOp(".") && Peek().type == T::kName) {
      Advance();
      absl::StrAppend(&name, ".", Cur().value);
      Advance();
    }
    return name;
  }

  // `node | f(...) | g`; node may be null (a filter block or set block).
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool first_without_pipe = false) {
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

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node) {
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

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace kvfleet::jinja
