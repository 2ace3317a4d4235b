// Recorded outputs of the three formats, with the prose and malformed
// cases that must stay content.
#include "services/router/chat/tool_call_parser.h"

#include <gtest/gtest.h>

namespace kvfleet::router::chat {
namespace {

const absl::flat_hash_set<std::string> kTools = {"get_weather", "get_time"};

ToolParseOutput Stream(ToolCallFormat format, std::string_view output, size_t step) {
  ToolCallParser p(format, kTools);
  ToolParseOutput all;
  auto add = [&](ToolParseOutput o) {
    all.content += o.content;
    for (auto& c : o.calls) all.calls.push_back(c);
  };
  for (size_t i = 0; i < output.size(); i += step) add(p.Push(output.substr(i, step)));
  add(p.Finish());
  return all;
}

TEST(ToolCallParserTest, HermesCallsWholeAndStreamed) {
  // Qwen2.5-Coder's output for "weather in Paris and Tokyo?" with two tools.
  const std::string out =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>";
  for (size_t step : {1, 5, 13, 10000}) {
    ToolParseOutput o = Stream(ToolCallFormat::kHermes, out, step);
    ASSERT_EQ(o.calls.size(), 2u) << step;
    EXPECT_EQ(o.calls[0].name, "get_weather");
    EXPECT_EQ(o.calls[0].arguments_json, R"({"city":"Paris","unit":"celsius"})");
    EXPECT_EQ(o.calls[1].arguments_json, R"({"city":"Tokyo"})");
    EXPECT_EQ(o.content, "") << step;  // the newline between calls is not content
  }
}

TEST(ToolCallParserTest, HermesKeepsTextAroundCallsAndStringArguments) {
  ToolParseOutput o = Stream(ToolCallFormat::kHermes,
                             "Let me check.\n<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"city\\\": "
                             "\\\"Oslo\\\"}\"}</tool_call>",
                             4);
  EXPECT_EQ(o.content, "Let me check.\n");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments_json, R"({"city":"Oslo"})");
  // A model that stops before the closing tag still made a complete call.
  ToolParseOutput unclosed = Stream(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}", 3);
  ASSERT_EQ(unclosed.calls.size(), 1u);
}

TEST(ToolCallParserTest, MalformedOrUnknownCallsAndProseStayContent) {
  const std::string cases[] = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par</tool_call>",  // broken JSON
      "<tool_call>{\"name\": \"launch_rockets\", \"arguments\": {}}</tool_call>",               // not a tool
      "<tool_call>{\"arguments\": {}}</tool_call>",                                             // no name
      "To call a tool, write <tool_call> followed by JSON.",                                    // prose, unclosed
      "I would call get_weather with {\"city\": \"Paris\"} but I will not.",
  };
  for (const std::string& c : cases) {
    for (size_t step : {1, 6, 1000}) {
      ToolParseOutput o = Stream(ToolCallFormat::kHermes, c, step);
      EXPECT_TRUE(o.calls.empty()) << c;
      EXPECT_EQ(o.content, c) << c << " step " << step;
    }
  }
}

TEST(ToolCallParserTest, Llama3JsonIsTheWholeOutput) {
  ToolParseOutput one = Stream(ToolCallFormat::kLlama3Json,
                               "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 7);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].arguments_json, R"({"city":"Paris"})");
  ToolParseOutput two = Stream(ToolCallFormat::kLlama3Json,
                               "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"a;b\"}}; "
                               "{\"name\": \"get_weather\", \"parameters\": {}}",
                               5);
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].arguments_json, R"({"tz":"a;b"})");
  // Prose, JSON that is not a call, and a call after prose are content.
  for (const std::string c : {"The weather is fine.", "{\"city\": \"Paris\"}",
                              "Sure: {\"name\": \"get_time\", \"parameters\": {}}"}) {
    ToolParseOutput o = Stream(ToolCallFormat::kLlama3Json, c, 3);
    EXPECT_TRUE(o.calls.empty()) << c;
    EXPECT_EQ(o.content, c);
  }
}

TEST(ToolCallParserTest, MistralList) {
  ToolParseOutput o = Stream(ToolCallFormat::kMistral,
                             "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}, "
                             "{\"name\": \"get_time\", \"arguments\": {}}]",
                             4);
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[1].name, "get_time");
  ToolParseOutput bad = Stream(ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"get_weather\", ", 4);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "[TOOL_CALLS][{\"name\": \"get_weather\", ");
}

// Streamed pieces (stream_arguments) as a client assembles them: a piece
// with a name starts a call, one without appends to its arguments.
struct Assembled {
  std::string content;
  std::vector<ParsedToolCall> calls;
  int pieces = 0;
};

Assembled StreamPieces(std::string_view output, size_t step) {
  ToolCallParser p(ToolCallFormat::kHermes, kTools, /*stream_arguments=*/true);
  Assembled all;
  auto add = [&](ToolParseOutput o) {
    all.content += o.content;
    for (ParsedToolCall& c : o.calls) {
      ++all.pieces;
      if (!c.name.empty()) {
        all.calls.push_back(c);
      } else {
        EXPECT_FALSE(all.calls.empty()) << "arguments before any call's name";
        if (!all.calls.empty()) all.calls.back().arguments_json += c.arguments_json;
      }
    }
  };
  for (size_t i = 0; i < output.size(); i += step) add(p.Push(output.substr(i, step)));
  add(p.Finish());
  return all;
}

TEST(ToolCallParserTest, EnforcedHermesCallsStreamTheirArguments) {
  // As the worker's grammar writes them (xgrammar's separators).
  const std::string out =
      "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris {\\\"}\", "
      "\"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t step : {1, 3, 7, 10000}) {
    const Assembled o = StreamPieces(out, step);
    ASSERT_EQ(o.calls.size(), 2u) << step;
    EXPECT_EQ(o.content, "Let me check.") << step;
    EXPECT_EQ(o.calls[0].name, "get_weather");
    EXPECT_EQ(o.calls[0].arguments_json, R"({"city": "Paris {\"}", "days": [1, 2]})") << step;
    EXPECT_EQ(o.calls[1].name, "get_time");
    EXPECT_EQ(o.calls[1].arguments_json, "{}");
    // Token-sized steps give the arguments in many pieces, not one.
    if (step == 1) {
      EXPECT_GT(o.pieces, 20);
    } else if (step == 10000) {
      EXPECT_EQ(o.pieces, 4) << "one name piece and one arguments piece per call";
    }
  }
}

TEST(ToolCallParserTest, AStreamedCallCutByTheLengthLimitKeepsWhatWasSent) {
  const Assembled o =
      StreamPieces("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", 4);
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments_json, R"({"city": "Par)");
  EXPECT_EQ(o.content, "");
}

TEST(ToolCallParserTest, AStreamedCallWithAnotherShapeIsReadWhole) {
  // Arguments before the name, or a name no tool has: read whole as without
  // a grammar (a call when valid, content otherwise).
  const Assembled reordered = StreamPieces(
      "<tool_call>\n{\"arguments\": {\"city\": \"Oslo\"}, \"name\": \"get_weather\"}\n</tool_call>", 2);
  ASSERT_EQ(reordered.calls.size(), 1u);
  EXPECT_EQ(reordered.calls[0].arguments_json, R"({"city":"Oslo"})");
  EXPECT_EQ(reordered.pieces, 1);
  const std::string unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
  const Assembled refused = StreamPieces(unknown, 3);
  EXPECT_TRUE(refused.calls.empty());
  EXPECT_EQ(refused.content, unknown);
}

}  // namespace
}  // namespace kvfleet::router::chat
