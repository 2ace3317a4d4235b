#include "model/tokenizer/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace kvfleet::model {
namespace {

StopStringMatcher Make(std::vector<std::string> stops) { return *StopStringMatcher::Create(std::move(stops)); }

TEST(StopStringMatcherTest, TextBeforeTheStopIsSentAndTheStopIsNot) {
  StopStringMatcher m = Make({"END"});
  EXPECT_EQ(m.Push("Hello "), "Hello ");
  EXPECT_EQ(m.Push("world END and more"), "world ");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopStringMatcherTest, APossibleStartIsHeldBackUntilItResolves) {
  StopStringMatcher m = Make({"\n\nUser:"});
  EXPECT_EQ(m.Push("answer\n"), "answer");
  EXPECT_EQ(m.Push("\nUs"), "");
  EXPECT_EQ(m.Push("ually"), "\n\nUsually") << "not a stop after all: released whole";
  EXPECT_EQ(m.Push("\n\nUs"), "");
  EXPECT_EQ(m.Push("er: hi"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopStringMatcherTest, TheFirstStopToCompleteWinsAndFinishReleasesTheTail) {
  StopStringMatcher m = Make({"bc", "abcd"});
  EXPECT_EQ(m.Push("xxab"), "xx");
  EXPECT_EQ(m.Push("c"), "a");
  EXPECT_EQ(m.matched(), "bc");
  StopStringMatcher both = Make({"abcd", "cd"});
  EXPECT_EQ(both.Push("xabcdy"), "x") << "cd and abcd complete together: none of either is shown";
  EXPECT_EQ(both.matched(), "abcd");
  StopStringMatcher n = Make({"STOP"});
  EXPECT_EQ(n.Push("the end ST"), "the end ");
  EXPECT_EQ(n.Finish(), "ST");
  EXPECT_FALSE(n.stopped());
}

TEST(StopStringMatcherTest, NoStopsPassesEverythingThrough) {
  StopStringMatcher m = Make({});
  EXPECT_EQ(m.Push("a\n\nb"), "a\n\nb");
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopStringMatcherTest, MultiByteCharactersStayWhole) {
  StopStringMatcher m = Make({"日本"});
  EXPECT_EQ(m.Push("こんにちは日"), "こんにちは");
  EXPECT_EQ(m.Push("曜"), "日曜");
}

TEST(StopStringMatcherTest, AnEmptyStopStringIsRefused) {
  EXPECT_EQ(StopStringMatcher::Create({"a", ""}).status().code(), absl::StatusCode::kInvalidArgument);
}

// However the text is cut into deltas, the output is the text up to the
// stop string that completes first, exactly.
TEST(StopStringMatcherTest, AnySplitGivesTheSameResultAsTheWholeText) {
  std::mt19937 rng(5);
  const std::vector<std::string> stops = {"aab", "ba", "abab"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < len; ++i) text.push_back("abc"[rng() % 3]);
    // Reference: the stop whose first occurrence ends earliest (then starts earliest).
    size_t first = std::string::npos, first_end = std::string::npos;
    for (const std::string& s : stops) {
      const size_t at = text.find(s);
      if (at == std::string::npos) continue;
      if (at + s.size() < first_end || (at + s.size() == first_end && at < first)) {
        first = at;
        first_end = at + s.size();
      }
    }
    const std::string expected = text.substr(0, first);

    StopStringMatcher m = Make(stops);
    std::string out;
    for (size_t at = 0; at < text.size();) {
      const size_t n = 1 + rng() % 4;
      out += m.Push(std::string_view(text).substr(at, n));
      at += n;
    }
    out += m.Finish();
    ASSERT_EQ(out, expected) << "text '" << text << "'";
    ASSERT_EQ(m.stopped(), first != std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kvfleet::model
