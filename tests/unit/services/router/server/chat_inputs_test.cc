#include "services/router/server/chat_inputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvfleet::router {
namespace {

using ::testing::HasSubstr;

v1::ChatRequest WeatherChat() {
  v1::ChatRequest r;
  v1::ChatMessage* user = r.add_messages();
  user->set_role("user");
  user->set_content("weather?");
  v1::ChatMessage* call = r.add_messages();
  call->set_role("assistant");
  v1::ToolCall* c = call->add_tool_calls();
  c->set_id("c1");
  c->set_name("get_weather");
  c->set_arguments_json(R"({"city": "Paris", "days": 2})");
  v1::ChatMessage* result = r.add_messages();
  result->set_role("tool");
  result->set_tool_call_id("c1");
  result->set_content("sunny");
  v1::Tool* tool = r.add_tools();
  tool->set_name("get_weather");
  tool->set_parameters_json(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
  return r;
}

TEST(ChatInputsTest, MessagesAndToolsBecomeWhatHuggingFaceTemplatesRead) {
  absl::StatusOr<ChatPromptInputs> in = ChatInputsFromRequest(WeatherChat());
  ASSERT_TRUE(in.ok()) << in.status();
  const nlohmann::ordered_json& m = in->template_inputs.messages;
  EXPECT_TRUE(m[1]["content"].is_null());  // an assistant turn of calls only
  // Arguments reach the template as an object, in the client's key order.
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"city":"Paris","days":2})");
  EXPECT_EQ(m[2]["tool_call_id"], "c1");
  EXPECT_EQ(in->template_inputs.tools[0]["function"]["name"], "get_weather");
  EXPECT_TRUE(in->output.parse_tools);
  EXPECT_TRUE(in->output.tool_names.contains("get_weather"));
}

// With the conversation as the client sent it, the template renders that,
// fields and key order included, after the typed request was checked.
TEST(ChatInputsTest, TheTemplateRendersTheConversationAsSentWhenThereIsOne) {
  openai::SentConversation sent;
  sent.messages = nlohmann::ordered_json::parse(R"([{"content": "weather?", "role": "user"}])");
  sent.tools = nlohmann::ordered_json::parse(
      R"([{"function": {"parameters": {"properties": {}, "type": "object"}, "name": "get_weather", "strict": false},
           "type": "function"}])");
  absl::StatusOr<ChatPromptInputs> in = ChatInputsFromRequest(WeatherChat(), &sent);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->template_inputs.messages.dump(), sent.messages.dump());
  EXPECT_EQ(in->template_inputs.tools.dump(), sent.tools.dump());
  // Without it, JSON built from the typed request (OpenAI's key order).
  absl::StatusOr<ChatPromptInputs> built = ChatInputsFromRequest(WeatherChat());
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->template_inputs.tools[0].dump(),
            R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":)"
            R"({"city":{"type":"string"}}}}})");
  // A typed request that fails its checks fails, whatever was sent.
  v1::ChatRequest bad = WeatherChat();
  bad.mutable_messages(2)->clear_tool_call_id();
  EXPECT_FALSE(ChatInputsFromRequest(bad, &sent).ok());
}

TEST(ChatInputsTest, ToolChoiceNoneShowsToolsButParsesNoCalls) {
  v1::ChatRequest r = WeatherChat();
  r.mutable_tool_choice()->set_mode(v1::ToolChoice::NONE);
  absl::StatusOr<ChatPromptInputs> in = ChatInputsFromRequest(r);
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(in->output.parse_tools);
  EXPECT_EQ(in->template_inputs.tools.size(), 1u);
}

TEST(ChatInputsTest, ErrorsNameTheField) {
  auto error = [](const v1::ChatRequest& r) { return std::string(ChatInputsFromRequest(r).status().message()); };
  v1::ChatRequest r = WeatherChat();
  r.mutable_messages(2)->clear_tool_call_id();
  EXPECT_THAT(error(r), HasSubstr("messages[2].tool_call_id"));
  r = WeatherChat();
  r.mutable_tool_choice()->set_mode(v1::ToolChoice::FUNCTION);
  r.mutable_tool_choice()->set_function_name("get_time");
  EXPECT_THAT(error(r), HasSubstr("'get_time', which is not among tools"));
  r = WeatherChat();
  r.mutable_tools(0)->set_parameters_json("[1]");
  EXPECT_THAT(error(r), HasSubstr("tools[0].function.parameters"));
  r = WeatherChat();
  r.mutable_tools(0)->set_name("has space");
  EXPECT_THAT(error(r), HasSubstr("tools[0].function.name"));
  r = WeatherChat();
  r.set_chat_template_kwargs_json(R"({"messages": []})");
  EXPECT_THAT(error(r), HasSubstr("chat_template_kwargs sets 'messages'"));
  r = WeatherChat();
  r.mutable_messages(0)->set_role("narrator");
  EXPECT_THAT(error(r), HasSubstr("messages[0].role"));
}

}  // namespace
}  // namespace kvfleet::router
