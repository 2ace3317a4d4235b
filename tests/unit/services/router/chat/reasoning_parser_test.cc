#include "services/router/chat/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvfleet::router::chat {
namespace {

// Streams `output` in pieces of `step` bytes and joins what comes out.
SplitText Stream(std::string_view output, size_t step, bool starts_inside) {
  ReasoningParser p("<think>", "</think>", starts_inside);
  SplitText all;
  for (size_t i = 0; i < output.size(); i += step) {
    SplitText s = p.Push(output.substr(i, step));
    all.reasoning += s.reasoning;
    all.content += s.content;
  }
  SplitText rest = p.Finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

TEST(ReasoningParserTest, SplitsReasoningFromTheAnswerWhateverTheDeltas) {
  // A Qwen3 output, and a DeepSeek-R1 one (its prompt opened the block).
  for (size_t step : {1, 2, 3, 7, 1000}) {
    SplitText qwen3 = Stream("<think>\n2 and 2 make 4.\n</think>\n\nIt is 4.", step, false);
    EXPECT_EQ(qwen3.reasoning, "\n2 and 2 make 4.\n") << step;
    EXPECT_EQ(qwen3.content, "\n\nIt is 4.") << step;
    SplitText r1 = Stream("Adding.\n</think>\n\n4", step, true);
    EXPECT_EQ(r1.reasoning, "Adding.\n") << step;
    EXPECT_EQ(r1.content, "\n\n4") << step;
  }
}

TEST(ReasoningParserTest, OutputWithoutTheTagIsAllAnswer) {
  for (size_t step : {1, 4, 100}) {
    SplitText plain = Stream("The answer mentions <think> later.", step, false);
    EXPECT_EQ(plain.reasoning, "");
    EXPECT_EQ(plain.content, "The answer mentions <think> later.");
    SplitText partial = Stream("<thin", step, false);  // ended before a tag was whole
    EXPECT_EQ(partial.content, "<thin");
  }
}

TEST(ReasoningParserTest, AnUnfinishedBlockIsReasoning) {
  SplitText cut = Stream("<think>still thinking </thi", 3, false);
  EXPECT_EQ(cut.reasoning, "still thinking </thi");
  EXPECT_EQ(cut.content, "");
}

TEST(ReasoningParserTest, HoldsBackOnlyWhatCouldStartATag) {
  EXPECT_EQ(PartialTagSuffix("abc</th", "</think>"), 4u);
  EXPECT_EQ(PartialTagSuffix("abc<", "</think>"), 1u);
  EXPECT_EQ(PartialTagSuffix("abc", "</think>"), 0u);
  ReasoningParser p("<think>", "</think>", true);
  EXPECT_EQ(p.Push("abc</th").reasoning, "abc");
  EXPECT_EQ(p.Push("ink>x").content, "x");
}

}  // namespace
}  // namespace kvfleet::router::chat
