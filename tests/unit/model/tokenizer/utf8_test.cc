#include "model/tokenizer/utf8.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvfleet::model {
namespace {

Utf8Unit Scan(std::string_view s) { return ScanUtf8(s, 0); }

TEST(Utf8Test, ClassifiesSequences) {
  EXPECT_EQ(Scan("a").kind, Utf8Unit::kValid);
  EXPECT_EQ(Scan("é").length, 2u);
  EXPECT_EQ(Scan("€").length, 3u);
  EXPECT_EQ(Scan("😀").length, 4u);
  // Truncated but still a valid prefix.
  EXPECT_EQ(Scan("\xF0\x9F\x98").kind, Utf8Unit::kIncomplete);
  EXPECT_EQ(Scan("\xF0\x9F\x98").length, 3u);
  // Maximal subparts of invalid input (Unicode Table 3-7).
  struct Case {
    std::string bytes;
    size_t subpart;
  };
  for (const Case& c : {Case{"\x80", 1}, Case{"\xC0\x80", 1}, Case{"\xE0\x80\x80", 1}, Case{"\xED\xA0\x80", 1},
                        Case{"\xF4\x90\x80\x80", 1}, Case{"\xF5", 1},
                        Case{"\xE2\x82"
                             "A",
                             2},
                        Case{"\xF0\x9F\x98"
                             "A",
                             3}}) {
    const Utf8Unit u = Scan(c.bytes);
    EXPECT_EQ(u.kind, Utf8Unit::kInvalid) << ::testing::PrintToString(c.bytes);
    EXPECT_EQ(u.length, c.subpart) << ::testing::PrintToString(c.bytes);
  }
}

TEST(Utf8Test, ValidateNamesTheOffset) {
  EXPECT_TRUE(ValidateUtf8("plain ascii and ünïcödé 😀").ok());
  absl::Status s = ValidateUtf8("abc\xED\xA0\x80");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("byte offset 3"));
  EXPECT_FALSE(ValidateUtf8("ab\xE2\x82").ok());
}

TEST(Utf8Test, DecodeAndAppendRoundTrip) {
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u20AC', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    AppendUtf8(cp, &s);
    char32_t back = 0;
    EXPECT_EQ(DecodeUtf8(s, 0, &back), s.size());
    EXPECT_EQ(back, cp);
  }
}

}  // namespace
}  // namespace kvfleet::model
