#include "model/jinja/parser.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/parser_internal.h"

namespace kvfleet::jinja {
namespace internal {

absl::StatusOr<Body> Parser::ParseTemplate() {
  ASSIGN_OR_RETURN(Body body, Subparse({}));
  if (!At(T::kEnd)) return Fail("unexpected tag '" + Cur().value + "'");
  return body;
}

absl::Status Parser::Fail(std::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("line ", Cur().line, ": ", std::string(what)));
}

std::string Parser::Describe() const {
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

absl::Status Parser::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return absl::OkStatus();
  return Fail(absl::StrCat("expected '", std::string(op), "', got ", Describe()));
}

absl::Status Parser::ExpectName(std::string_view name) {
  if (SkipName(name)) return absl::OkStatus();
  return Fail(absl::StrCat("expected '", std::string(name), "', got ", Describe()));
}

absl::StatusOr<std::string> Parser::ExpectAnyName() {
  if (!At(T::kName)) return Fail(absl::StrCat("expected a name, got ", Describe()));
  std::string name = Cur().value;
  Advance();
  return name;
}

absl::Status Parser::ExpectBlockEnd() {
  if (At(T::kBlockEnd)) {
    Advance();
    return absl::OkStatus();
  }
  return Fail(absl::StrCat("expected end of statement block, got ", Describe()));
}

ExprPtr Parser::Node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

absl::StatusOr<Body> Parser::Subparse(std::initializer_list<std::string_view> end_names) {
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

absl::StatusOr<StmtPtr> Parser::ParseStatement(std::initializer_list<std::string_view> open_ends) {
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

absl::Status Parser::CloseBlock(std::string_view name) {
  RETURN_IF_ERROR(ExpectName(name));
  return ExpectBlockEnd();
}

absl::Status Parser::ParseIf(Stmt* s) {
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

absl::Status Parser::ParseFor(Stmt* s) {
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

absl::Status Parser::ParseSet(Stmt* s) {
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

absl::Status Parser::ParseMacro(Stmt* s) {
  s->kind = Stmt::Kind::kMacro;
  ASSIGN_OR_RETURN(s->name, ExpectAnyName());
  RETURN_IF_ERROR(ParseSignature(s));
  RETURN_IF_ERROR(ExpectBlockEnd());
  ASSIGN_OR_RETURN(Body body, BodyUntil({"endmacro"}));
  s->bodies.push_back(std::move(body));
  return CloseBlock("endmacro");
}

absl::Status Parser::ParseSignature(Stmt* s) {
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

absl::Status Parser::ParseCallBlock(Stmt* s) {
  s->kind = Stmt::Kind::kCallBlock;
  if (AtOp("(")) RETURN_IF_ERROR(ParseSignature(s));
  ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
  if (s->expr->kind != Expr::Kind::kCall) return Fail("expected a call after 'call'");
  RETURN_IF_ERROR(ExpectBlockEnd());
  ASSIGN_OR_RETURN(Body body, BodyUntil({"endcall"}));
  s->bodies.push_back(std::move(body));
  return CloseBlock("endcall");
}

absl::Status Parser::ParseFilterBlock(Stmt* s) {
  s->kind = Stmt::Kind::kFilterBlock;
  ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr, /*first_without_pipe=*/true));
  RETURN_IF_ERROR(ExpectBlockEnd());
  ASSIGN_OR_RETURN(Body body, BodyUntil({"endfilter"}));
  s->bodies.push_back(std::move(body));
  return CloseBlock("endfilter");
}

absl::Status Parser::ParseWith(Stmt* s) {
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

absl::StatusOr<Target> Parser::ParseAssignTarget(bool allow_attribute) {
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

}  // namespace internal

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) { return internal::Parser(tokens).ParseTemplate(); }

}  // namespace kvfleet::jinja
