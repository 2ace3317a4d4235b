// The parsed form of a template: expressions and statements, one node type
// each with a kind, the fields that kind uses, and the source line that
// errors name. The parser (parser.h) builds them; the interpreter
// (interpreter.h) walks them; nothing else depends on their layout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/jinja/value.h"

namespace kvfleet::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kConstant,   // value
    kName,       // name
    kGetAttr,    // operands[0].name
    kGetItem,    // operands[0][operands[1]]
    kSlice,      // operands[0][operands[1]:operands[2]:operands[3]] (null: omitted)
    kCall,       // operands[0](operands[1..], keywords)
    kFilter,     // operands[0] | name(operands[1..], keywords); operands[0] null in a filter block
    kTest,       // operands[0] is [not] name(operands[1..]); negated
    kNot,        // not operands[0]
    kNegate,     // -operands[0]
    kPlus,       // +operands[0]
    kBinary,     // operands[0] op operands[1]: "+", "-", "*", "/", "//", "%", "**", "~", "and", "or"
    kCompare,    // operands[0] ops[0] operands[1] ops[1] operands[2] ...: "==", "<", "in", "notin", ...
    kCondition,  // operands[1] if operands[0] else operands[2] (null: no else)
    kList,       // [operands...]
    kTuple,      // (operands...)
    kDict,       // {operands[0]: operands[1], ...}
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // a name, attribute, filter, test or binary operator
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: a name, a tuple of names (for a, b in ...), or an
// attribute of a namespace (ns.count = ...).
struct Target {
  std::vector<std::string> names;  // one name, or the names of a tuple
  bool is_tuple = false;
  std::string attribute;           // non-empty: names[0].attribute
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    kText,        // text
    kPrint,       // {{ expr }}
    kIf,          // conditions[i] -> bodies[i]; bodies.back() is the else when it has one more
    kFor,         // for target in expr [if condition] bodies[0] [else bodies[1]]
    kSet,         // set target = expr
    kSetBlock,    // set target [| filter] bodies[0] endset
    kMacro,       // macro name(params) bodies[0]
    kCallBlock,   // call(params) expr bodies[0]
    kFilterBlock, // filter expr bodies[0]
    kWith,        // with targets = values bodies[0]
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<ExprPtr> conditions;  // kIf; kFor's loop filter; kWith's values
  std::vector<Body> bodies;
  std::vector<Target> targets;      // kFor, kSet, kSetBlock, kWith
  std::string name;                 // kMacro
  std::vector<MacroParam> params;   // kMacro, kCallBlock
  bool recursive = false;           // kFor
};

}  // namespace kvfleet::jinja
