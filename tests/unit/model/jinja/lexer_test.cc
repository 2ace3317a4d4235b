#include "model/jinja/lexer.h"

#include <gtest/gtest.h>

namespace kvfleet::jinja {
namespace {

// The text tokens, concatenated: what a template of only literals renders.
std::string Data(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  std::string out;
  for (const Token& t : *tokens) {
    if (t.type == Token::Type::kData) out += t.value;
  }
  return out;
}

TEST(LexerTest, TrimBlocksDropsOneNewlineAfterBlocksAndComments) {
  EXPECT_EQ(Data("{% if x %}\nA\n{% endif %}\n"), "A\n");
  EXPECT_EQ(Data("{# c #}\n\nB"), "\nB");
  EXPECT_EQ(Data("{{ x }}\nC"), "\nC");      // not after a print
  EXPECT_EQ(Data("{% if x +%}\nD"), "\nD");  // "+" keeps it
}

TEST(LexerTest, LstripBlocksDropsIndentationBeforeBlocks) {
  EXPECT_EQ(Data("a\n    {% if x %}b"), "a\nb");
  EXPECT_EQ(Data("a\n    {{ x }}b"), "a\n    b");  // not before a print
  EXPECT_EQ(Data("a  {% if x %}b"), "a  b");         // not after text on the line
  EXPECT_EQ(Data("a\n  {%+ if x %}b"), "a\n  b");
}

TEST(LexerTest, MinusStripsAllWhitespace) {
  EXPECT_EQ(Data("a \n\t {%- if x -%} \n b"), "ab");
  EXPECT_EQ(Data("a \n{{- x -}}\n b"), "ab");
}

TEST(LexerTest, NewlinesNormaliseAndOneTrailingNewlineGoes) {
  EXPECT_EQ(Data("a\r\nb\rc\n\n"), "a\nb\nc\n");
  EXPECT_EQ(Data("{% raw %}{{ x }}\n{% endraw %}\nz"), "{{ x }}\nz");
}

TEST(LexerTest, LiteralsDecodeAsPythonDoes) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(R"({{ 'a\n\u00e9\x41' "b" 1_000 0x1F 1e3 2.5 }})");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[1].value, "a\n\xC3\xA9" "A");
  EXPECT_EQ((*tokens)[3].integer, 1000);
  EXPECT_EQ((*tokens)[4].integer, 31);
  EXPECT_EQ((*tokens)[5].number, 1000.0);
  EXPECT_EQ((*tokens)[6].number, 2.5);
}

TEST(LexerTest, UnterminatedThingsNameTheLine) {
  EXPECT_NE(Tokenize("a\n{{ 'x }}").status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(Tokenize("{# never closed").ok());
  EXPECT_FALSE(Tokenize("{{ x ").ok());
  EXPECT_FALSE(Tokenize("{% raw %}x").ok());
}

}  // namespace
}  // namespace kvfleet::jinja
