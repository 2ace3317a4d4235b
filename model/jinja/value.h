// The values a template computes with, with Python's semantics: jinja2
// evaluates templates as Python, so truthiness, equality, str() and repr()
// here are Python's (True prints "True", 1.0 prints "1.0", a list prints
// "['a', 1]"), and an undefined name is jinja2's default Undefined: it
// prints as nothing, is falsy, iterates as empty, has length 0, and raises
// when used in arithmetic, called, or has an attribute read from it.
//
// Lists and dicts are shared and immutable once built (the sandbox Hugging
// Face renders templates in forbids list.append and dict.update), so a
// Value copies in O(1) for them; dicts keep insertion order, like Python's.
// A namespace() is the one mutable, shared container.
//
// Thread-safety: a value type; shared containers are never mutated after
// construction except a namespace, which belongs to one render.
//
//   Value v = Value::List({Value::Int(1), Value::String(Text::Literal("a"))});
//   v.ToText().str() == "[1, 'a']"
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "model/jinja/text.h"

namespace kvfleet::jinja {

class Value;

// Python has several sequence types templates meet, and they differ where
// jinja2's results depend on it: map/select return generators (always
// truthy, no len(), not JSON), dict.items() returns a view, range() a range.
enum class SeqKind { kList, kTuple, kGenerator, kView, kRange };

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  SeqKind kind = SeqKind::kList;
  std::string type_name;  // kGenerator, kView, kRange: Python's type name ("dict_items")
  std::string repr;       // kRange: "range(0, 3)"
  bool is_list_or_tuple() const { return kind == SeqKind::kList || kind == SeqKind::kTuple; }
};

struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(Value key, Value value);  // replaces in place or appends
};

// Arguments of a call: f(1, x=2).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<absl::StatusOr<Value>(const CallArgs&)>;

struct FunctionData {
  std::string name;
  NativeFunction call;
  DictData attributes;  // what `f.name` reads (a loop object's loop.index, ...)
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction, kNamespace };

  // Undefined; `hint` is jinja2's message for using it: "'x' is undefined".
  Value() = default;
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(Text t);
  static Value Literal(std::string s) { return String(Text::Literal(std::move(s))); }
  static Value List(std::vector<Value> items, bool is_tuple = false);
  // A generator, view or range over `items` (see SeqKind).
  static Value Sequence(std::vector<Value> items, SeqKind kind, std::string type_name, std::string repr = "");
  // A string jinja2 treats as safe markup (Markup): what |safe and |escape
  // return; adding a plain string to it escapes that string.
  static Value Markup(Text t);
  static Value Dict(DictData dict);
  static Value Function(std::string name, NativeFunction call, DictData attributes = {});
  static Value Namespace(DictData dict);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  // Python int: bool is one too.
  bool is_integer() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_number() const { return is_integer() || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kFunction; }
  bool is_markup() const { return kind_ == Kind::kString && bool_; }
  // A list or tuple proper (not a generator, view or range).
  bool is_plain_list() const { return kind_ == Kind::kList && list_->is_list_or_tuple(); }

  bool bool_value() const { return bool_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }
  double number_value() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_value()); }
  const Text& text() const { return text_; }
  const std::string& str() const { return text_.str(); }
  const ListData& list() const { return *list_; }
  const DictData& dict() const { return *dict_; }
  DictData& namespace_dict() const { return *dict_; }
  const FunctionData& function() const { return *function_; }
  const std::string& undefined_hint() const { return text_.str(); }

  bool Truthy() const;
  // Python's str(v), which is what {{ v }} prints ("" for undefined).
  Text ToText() const;
  // Python's repr(v).
  std::string Repr() const;
  // Python's ==.
  bool Equals(const Value& other) const;
  std::string Repr(std::vector<const DictData*>* open) const;
  // jinja2's name for the type in messages: "dict object", "str object".
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;  // kBool: the value; kString: Markup
  int64_t int_ = 0;
  double float_ = 0;
  Text text_;  // kString; kUndefined: the hint
  std::shared_ptr<const ListData> list_;
  std::shared_ptr<DictData> dict_;  // kDict (never mutated) or kNamespace
  std::shared_ptr<const FunctionData> function_;
};

// Python's repr() of a float ("1.0", "0.1", "1e+16", "inf").
std::string FloatRepr(double d);
// Python's repr() of a str.
std::string StringRepr(std::string_view s);

// Python's ordering (<) for numbers, strings and sequences; an error for
// other pairs, as Python raises TypeError.
absl::StatusOr<bool> LessThan(const Value& a, const Value& b);

}  // namespace kvfleet::jinja
