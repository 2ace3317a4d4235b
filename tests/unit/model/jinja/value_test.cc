#include "model/jinja/value.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvfleet::jinja {
namespace {

TEST(ValueTest, FloatsPrintAsPythonRepr) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(1e-5), "1e-05");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(1.5e300), "1.5e+300");
  EXPECT_EQ(FloatRepr(INFINITY), "inf");
}

TEST(ValueTest, StringsPrintAsPythonRepr) {
  EXPECT_EQ(StringRepr("a"), "'a'");
  EXPECT_EQ(StringRepr("it's"), "\"it's\"");
  EXPECT_EQ(StringRepr("it's \"q\""), "'it\\'s \"q\"'");
  EXPECT_EQ(StringRepr("a\nb\\"), "'a\\nb\\\\'");
  EXPECT_EQ(StringRepr("\xC3\xA9\xE2\x80\x8B"), "'\xC3\xA9\\u200b'");  // é printable, zero-width space not
}

TEST(ValueTest, ContainersPrintAsPythonDoes) {
  Value list = Value::List({Value::Int(1), Value::Literal("a"), Value::None(), Value::Bool(true), Value::Float(2.5),
                            Value::Undefined("'x' is undefined")});
  EXPECT_EQ(list.ToText().str(), "[1, 'a', None, True, 2.5, Undefined]");
  EXPECT_EQ(Value::List({Value::Int(1)}, /*is_tuple=*/true).Repr(), "(1,)");
  DictData d;
  d.Set(Value::Literal("k"), Value::List({}));
  d.Set(Value::Int(2), Value::Literal("v"));
  EXPECT_EQ(Value::Dict(d).Repr(), "{'k': [], 2: 'v'}");
  EXPECT_EQ(Value::Sequence({Value::Int(0)}, SeqKind::kRange, "range", "range(0, 1)").Repr(), "range(0, 1)");
}

TEST(ValueTest, TruthAndEqualityArePythons) {
  EXPECT_FALSE(Value().Truthy());
  EXPECT_FALSE(Value::Literal("").Truthy());
  EXPECT_FALSE(Value::List({}).Truthy());
  EXPECT_TRUE(Value::Sequence({}, SeqKind::kGenerator, "generator").Truthy());  // a generator object is truthy
  EXPECT_TRUE(Value::Int(1).Equals(Value::Float(1.0)));
  EXPECT_TRUE(Value::Bool(true).Equals(Value::Int(1)));
  EXPECT_FALSE(Value::List({Value::Int(1)}).Equals(Value::List({Value::Int(1)}, true)));  // list != tuple
  EXPECT_FALSE(Value::Literal("1").Equals(Value::Int(1)));
  EXPECT_FALSE(LessThan(Value::Literal("a"), Value::Int(1)).ok());
}

}  // namespace
}  // namespace kvfleet::jinja
