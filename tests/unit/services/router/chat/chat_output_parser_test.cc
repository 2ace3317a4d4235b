#include "services/router/chat/chat_output_parser.h"

#include <gtest/gtest.h>

namespace kvfleet::router::chat {
namespace {

TEST(ChatOutputParserTest, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(DetectChatOutputFormat("...<tool_call>\\n{\"name\": ...", false).tool_calls, ToolCallFormat::kHermes);
  EXPECT_EQ(DetectChatOutputFormat("[AVAILABLE_TOOLS] [TOOL_CALLS]", false).tool_calls, ToolCallFormat::kMistral);
  EXPECT_EQ(DetectChatOutputFormat("<|start_header_id|>ipython<|end_header_id|>", false).tool_calls,
            ToolCallFormat::kLlama3Json);
  ChatOutputFormat smol = DetectChatOutputFormat("<|im_start|>{{ m.content }}", false);
  EXPECT_EQ(smol.tool_calls, ToolCallFormat::kNone);
  EXPECT_TRUE(smol.think_start.empty());
  EXPECT_EQ(DetectChatOutputFormat("", true).think_start, "<think>");
}

TEST(ChatOutputParserTest, ReasoningThenACall) {
  ChatOutputFormat f = DetectChatOutputFormat("<tool_call>", true);
  ChatOutputParser p(f, {.parse_tools = true, .tool_names = {"get_time"}});
  ChatOutputDelta all;
  const std::string out =
      "<think>\nThe user wants the time.\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "{\"city\": \"Oslo\"}}\n</tool_call>";
  for (size_t i = 0; i < out.size(); i += 4) {
    ChatOutputDelta d = p.Push(out.substr(i, 4));
    all.reasoning += d.reasoning;
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(c);
  }
  ChatOutputDelta rest = p.Finish();
  all.content += rest.content;
  EXPECT_EQ(all.reasoning, "\nThe user wants the time.\n");
  EXPECT_EQ(all.content, "\n\n");
  ASSERT_EQ(all.calls.size(), 1u);
  EXPECT_TRUE(p.found_calls());
}

TEST(ChatOutputParserTest, WithoutToolsCallTextIsContent) {
  ChatOutputParser p(DetectChatOutputFormat("<tool_call>", false), {.parse_tools = false});
  const std::string out = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  ChatOutputDelta d = p.Push(out);
  EXPECT_EQ(d.content + p.Finish().content, out);
  EXPECT_FALSE(p.found_calls());
}

}  // namespace
}  // namespace kvfleet::router::chat
