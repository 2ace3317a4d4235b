#include "model/jinja/text.h"

#include <gtest/gtest.h>

namespace kvfleet::jinja {
namespace {

std::string Origins(const Text& t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) out.push_back(t.IsInputByte(i) ? 'i' : 'l');
  return out;
}

TEST(TextTest, ConcatenationKeepsEachBytesOrigin) {
  Text t;
  t.Append(Text::Input("ab"));  // appending input to an empty text must keep it input
  t.Append(Text::Literal("c"));
  t.AppendLiteral("d");
  t.Append(Text::Input("e"));
  EXPECT_EQ(t.str(), "abcde");
  EXPECT_EQ(Origins(t), "iilli");
  EXPECT_TRUE(t.HasInput());
}

TEST(TextTest, SubstringsKeepOrigins) {
  Text t = Text::Literal("<s>");
  t.Append(Text::Input("user"));
  EXPECT_EQ(Origins(t.Substr(1, 4)), "llii");
  EXPECT_FALSE(t.Substr(0, 3).HasInput());
  EXPECT_FALSE(Text::Literal("x").HasInput());
  EXPECT_TRUE(Text::Derived("x", true).HasInput());
}

}  // namespace
}  // namespace kvfleet::jinja
