// OpenAI request bodies into the public API's protos: every supported
// field lands where the gRPC API would put it, OpenAI's defaults apply,
// unknown fields pass, and what is refused names its field.
#include "services/router/openai/openai_request.h"

#include <gtest/gtest.h>

namespace kvfleet::router::openai {
namespace {

CompletionCall ParseOk(Endpoint endpoint, std::string_view body) {
  absl::StatusOr<CompletionCall> call = ParseCompletionCall(endpoint, body);
  EXPECT_TRUE(call.ok()) << call.status() << " for " << body;
  return call.ok() ? *std::move(call) : CompletionCall{};
}

// The status and the param it names.
std::pair<absl::StatusCode, std::string> Refusal(Endpoint endpoint, std::string_view body) {
  absl::StatusOr<CompletionCall> call = ParseCompletionCall(endpoint, body);
  if (call.ok()) return {absl::StatusCode::kOk, ""};
  return {call.status().code(), ErrorParam(call.status())};
}

TEST(OpenAiRequestTest, ChatFieldsLandInTheChatRequest) {
  const CompletionCall call = ParseOk(Endpoint::kChat, R"({
    "model": "m", "stream": true, "stream_options": {"include_usage": true},
    "messages": [{"role": "developer", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null},
                 {"role": "user", "content": "again", "name": "ignored"}],
    "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "seed": 42, "stop": ["x", "y"], "presence_penalty": 0.1, "frequency_penalty": 0.2, "repetition_penalty": 1.1,
    "logprobs": true, "top_logprobs": 3, "cache_salt": "s", "user": "u-1", "priority": 5,
    "session_id": "conv-9", "ignore_eos": true, "stop_token_ids": [3, 4]})");
  EXPECT_EQ(call.endpoint, Endpoint::kChat);
  EXPECT_TRUE(call.stream);
  EXPECT_TRUE(call.include_usage);
  EXPECT_EQ(call.model, "m");
  EXPECT_EQ(call.user, "u-1");
  const v1::ChatRequest& chat = call.chat;
  ASSERT_EQ(chat.messages_size(), 4);
  EXPECT_EQ(chat.messages(0).role(), "system");  // developer is system's newer name
  EXPECT_EQ(chat.messages(1).content(), "a\nb");
  EXPECT_EQ(chat.messages(2).content(), "");
  const v1::GenerationOptions& o = chat.options();
  EXPECT_EQ(o.model(), "m");
  EXPECT_EQ(o.stopping().max_tokens(), 7);  // max_completion_tokens wins
  EXPECT_TRUE(o.stopping().ignore_eos());
  EXPECT_EQ(o.stopping().stop_token_ids_size(), 2);
  EXPECT_FLOAT_EQ(o.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(o.sampling().top_p(), 0.9f);
  EXPECT_EQ(o.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(o.sampling().min_p(), 0.05f);
  EXPECT_EQ(o.sampling().seed(), 42u);
  EXPECT_FLOAT_EQ(o.sampling().presence_penalty(), 0.1f);
  EXPECT_FLOAT_EQ(o.sampling().frequency_penalty(), 0.2f);
  EXPECT_FLOAT_EQ(o.sampling().repetition_penalty(), 1.1f);
  ASSERT_EQ(o.stop_size(), 2);
  EXPECT_EQ(o.stop(1), "y");
  EXPECT_TRUE(o.logprobs());
  EXPECT_EQ(o.top_logprobs(), 3);
  EXPECT_EQ(o.cache_salt(), "s");
  EXPECT_EQ(o.priority(), 5);
  EXPECT_EQ(o.session_id(), "conv-9");
}

TEST(OpenAiRequestTest, OpenAisDefaultsApplyNotTheGrpcApis) {
  const CompletionCall call = ParseOk(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_FALSE(call.stream);
  EXPECT_FLOAT_EQ(call.chat.options().sampling().temperature(), 1.0f);  // sampled, as OpenAI's API
  EXPECT_FALSE(call.chat.options().sampling().has_seed());
  EXPECT_EQ(call.chat.options().stopping().max_tokens(), 0);  // to the end of the context
  EXPECT_FALSE(call.chat.options().logprobs());
  EXPECT_FALSE(call.chat.has_add_generation_prompt());
}

TEST(OpenAiRequestTest, CompletionPromptsAreTextOrTokenIdsAndLogprobsACount) {
  CompletionCall text = ParseOk(Endpoint::kCompletion, R"({"prompt": "Once", "logprobs": 2, "stop": "\n"})");
  EXPECT_EQ(text.completion.prompt(), "Once");
  EXPECT_TRUE(text.logprobs);
  EXPECT_EQ(text.top_logprobs, 2);
  EXPECT_EQ(text.completion.options().top_logprobs(), 2);
  ASSERT_EQ(text.completion.options().stop_size(), 1);
  CompletionCall ids = ParseOk(Endpoint::kCompletion, R"({"prompt": [1, 2, 3], "logprobs": 0})");
  EXPECT_EQ(ids.completion.prompt_token_ids_size(), 3);
  EXPECT_TRUE(ids.logprobs);  // logprobs 0: the chosen token's, no alternatives
  EXPECT_EQ(ids.top_logprobs, 0);
  CompletionCall none = ParseOk(Endpoint::kCompletion, R"({"prompt": "x", "logprobs": null})");
  EXPECT_FALSE(none.logprobs);
}

TEST(OpenAiRequestTest, UnknownFieldsAndDefaultValuedUnsupportedOnesPass) {
  ParseOk(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "n": 1, "tools": [],
    "tool_choice": null, "metadata": {"a": 1}, "logit_bias": {}, "response_format": {"type": "text"},
    "parallel_tool_calls": false, "store": false, "some_future_field": [1, 2]})");
  ParseOk(Endpoint::kCompletion, R"({"prompt": "x", "echo": false, "best_of": 1, "suffix": ""})");
}

TEST(OpenAiRequestTest, UnsupportedFeaturesThatAskForSomethingAreRefusedNamingTheField) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], )";
  for (const auto& [field, body] : std::vector<std::pair<std::string, std::string>>{
           {"n", chat + R"("n": 2})"},
           {"functions", chat + R"("functions": [{"name": "f"}]})"},
           {"response_format.type", chat + R"("response_format": {"type": "xml"}})"},
           {"response_format.json_schema.schema", chat + R"("response_format": {"type": "json_schema"}})"},
           {"logit_bias.abc", chat + R"("logit_bias": {"abc": 1}})"},
           {"logit_bias.5", chat + R"("logit_bias": {"5": 101}})"},
           {"guided_regex", chat + R"("response_format": {"type": "json_object"}, "guided_regex": "a+"})"},
           {"messages[0].role", R"({"messages": [{"role": "function", "content": "x"}]})"},
           {"messages[0].content[0].type",
            R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})"},
           {"messages[0].tool_calls[0].function",
            R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}]})"}}) {
    EXPECT_EQ(Refusal(Endpoint::kChat, body), std::make_pair(absl::StatusCode::kInvalidArgument, field)) << body;
  }
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": "x", "echo": true})").second, "echo");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": "x", "best_of": 3})").second, "best_of");
}

TEST(OpenAiRequestTest, ToolsToolCallsAndResultsLandInTheChatRequest) {
  CompletionCall call = ParseOk(Endpoint::kChat, R"({
    "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false,
    "chat_template_kwargs": {"enable_thinking": false}})");
  const v1::ChatRequest& r = call.chat;
  ASSERT_EQ(r.messages_size(), 3);
  ASSERT_EQ(r.messages(1).tool_calls_size(), 1);
  EXPECT_EQ(r.messages(1).tool_calls(0).name(), "get_weather");
  EXPECT_EQ(r.messages(1).tool_calls(0).arguments_json(), R"({"city": "Paris"})");
  EXPECT_EQ(r.messages(2).tool_call_id(), "c1");
  ASSERT_EQ(r.tools_size(), 1);
  // Key order is the client's, as the template must see it.
  EXPECT_EQ(r.tools(0).parameters_json(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(r.tool_choice().mode(), v1::ToolChoice::FUNCTION);
  EXPECT_EQ(r.tool_choice().function_name(), "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls());
  EXPECT_EQ(r.chat_template_kwargs_json(), R"({"enable_thinking":false})");
}

TEST(OpenAiRequestTest, StructuredOutputsAndLogitBiasLandInTheOptions) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], )";
  CompletionCall schema = ParseOk(Endpoint::kChat, chat + R"("response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "strict": true, "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}},
      "logit_bias": {"42": -100, "7": 2.5}})");
  EXPECT_EQ(schema.chat.options().constraint().json_schema(), R"({"type":"object","properties":{"b":{},"a":{}}})");
  EXPECT_EQ(schema.chat.options().sampling().logit_bias().at(42), -100.0f);
  EXPECT_EQ(schema.chat.options().sampling().logit_bias().at(7), 2.5f);
  EXPECT_TRUE(ParseOk(Endpoint::kChat, chat + R"("response_format": {"type": "json_object"}})")
                  .chat.options().constraint().json_object());
  EXPECT_EQ(ParseOk(Endpoint::kChat, chat + R"("structured_outputs": {"regex": "[0-9]+"}})")
                .chat.options().constraint().regex(), "[0-9]+");
  EXPECT_EQ(ParseOk(Endpoint::kCompletion, R"({"prompt": "x", "guided_choice": ["yes", "no"]})")
                .completion.options().constraint().choice().choices_size(), 2);
  EXPECT_EQ(ParseOk(Endpoint::kChat, chat + R"("structured_outputs": {"grammar": "root ::= \"a\""}})")
                .chat.options().constraint().grammar(), "root ::= \"a\"");
}

TEST(OpenAiRequestTest, GenerationConfigDefaultsFillOnlyWhatTheRequestLeftUnset) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}])";
  CompletionCall unset = ParseOk(Endpoint::kChat, chat + "}");
  ApplyGenerationDefaults(0.7, 0.8, 20, unset);
  EXPECT_FLOAT_EQ(unset.chat.options().sampling().temperature(), 0.7f);
  EXPECT_FLOAT_EQ(unset.chat.options().sampling().top_p(), 0.8f);
  EXPECT_EQ(unset.chat.options().sampling().top_k(), 20);
  CompletionCall set = ParseOk(Endpoint::kChat, chat + R"(, "temperature": 0, "top_p": 1, "top_k": -1})");
  ApplyGenerationDefaults(0.7, 0.8, 20, set);
  EXPECT_EQ(set.chat.options().sampling().temperature(), 0.0f);
  EXPECT_FLOAT_EQ(set.chat.options().sampling().top_p(), 1.0f);
  EXPECT_EQ(set.chat.options().sampling().top_k(), 0);
  CompletionCall none = ParseOk(Endpoint::kChat, chat + "}");
  ApplyGenerationDefaults(std::nullopt, std::nullopt, std::nullopt, none);
  EXPECT_FLOAT_EQ(none.chat.options().sampling().temperature(), 1.0f);  // OpenAI's
}

TEST(OpenAiRequestTest, ToolErrorsNameTheField) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], )";
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}], )";
  for (const auto& [field, body] : std::vector<std::pair<std::string, std::string>>{
           {"tool_choice", chat + tools + R"("tool_choice": {"type": "function", "function": {"name": "g"}}})"},
           {"tool_choice", chat + R"("tool_choice": "required"})"},
           {"tool_choice", chat + tools + R"("tool_choice": "sometimes"})"},
           {"tools[0].function.parameters",
            chat + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]})"},
           {"tools[0].function.name", chat + R"("tools": [{"type": "function", "function": {}}]})"},
           {"tools[0].type", chat + R"("tools": [{"type": "retrieval"}]})"},
           {"messages[0].tool_call_id", R"({"messages": [{"role": "tool", "content": "x"}]})"},
           {"chat_template_kwargs", chat + R"("chat_template_kwargs": [1]})"}}) {
    EXPECT_EQ(Refusal(Endpoint::kChat, body), std::make_pair(absl::StatusCode::kInvalidArgument, field)) << body;
  }
}

TEST(OpenAiRequestTest, BadShapesAndTypesNameTheField) {
  EXPECT_EQ(Refusal(Endpoint::kChat, "{not json").second, "");
  // A number no double holds is refused, not thrown (it once ended the process).
  EXPECT_EQ(Refusal(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": 1e400})").first,
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseTokenizeCall("1e999").ok());
  EXPECT_FALSE(ParseDetokenizeCall(R"({"tokens": [1e999]})").ok());
  EXPECT_EQ(Refusal(Endpoint::kChat, "[1, 2]").first, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Refusal(Endpoint::kChat, R"({})").second, "messages");
  EXPECT_EQ(Refusal(Endpoint::kChat, R"({"messages": []})").second, "messages");
  EXPECT_EQ(Refusal(Endpoint::kChat, R"({"messages": [{"role": "king", "content": "x"}]})").second,
            "messages[0].role");
  EXPECT_EQ(Refusal(Endpoint::kChat, R"({"messages": [{"role": "user"}]})").second, "messages[0].content");
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], )";
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("temperature": "hot"})").second, "temperature");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("max_tokens": 0})").second, "max_tokens");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("max_tokens": 1.5})").second, "max_tokens");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("seed": -1})").second, "seed");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("stop": [1]})").second, "stop[0]");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("top_logprobs": 2})").second, "top_logprobs");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("top_logprobs": 21, "logprobs": true})").second, "top_logprobs");
  EXPECT_EQ(Refusal(Endpoint::kChat, chat + R"("stream": "yes"})").second, "stream");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": ["a", "b"]})").second, "prompt");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": ""})").second, "prompt");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": [1, "x"]})").second, "prompt[1]");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": [1, 18446744073709551615]})").second, "prompt[1]");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({"prompt": "x", "stop_token_ids": [4294967298]})").second,
            "stop_token_ids[0]");
  EXPECT_EQ(Refusal(Endpoint::kCompletion, R"({})").second, "prompt");
}

// The template sees the conversation as sent: keys in the client's order,
// every field kept (a `strict: false`, an unknown key), a call's object
// arguments decoded; only "developer" and content parts are normalized, as
// in the typed request.
TEST(OpenAiRequestTest, TheTemplateSeesTheConversationAsSent) {
  absl::StatusOr<CompletionCall> call = ParseCompletionCall(Endpoint::kChat, R"({
      "messages": [{"content": "be brief", "role": "developer"},
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                   {"role": "assistant", "content": null, "refusal": null,
                    "tool_calls": [{"id": "c1", "function": {"arguments": "{\"z\": 1, \"a\": 2}", "name": "f"},
                                    "type": "function"}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
      "tools": [{"function": {"parameters": {"type": "object", "properties": {}}, "name": "f", "strict": false,
                              "x-extra": 1}, "type": "function"}]})");
  ASSERT_TRUE(call.ok()) << call.status();
  const nlohmann::ordered_json& m = call->sent.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].dump(), R"({"content":"be brief","role":"system"})");
  EXPECT_EQ(m[1]["content"], "a\nb");
  EXPECT_EQ(m[2].dump(), R"({"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"c1","function":)"
                         R"({"arguments":{"z":1,"a":2},"name":"f"},"type":"function"}]})");
  EXPECT_EQ(call->sent.tools.dump(),
            R"([{"function":{"parameters":{"type":"object","properties":{}},"name":"f","strict":false,"x-extra":1},)"
            R"("type":"function"}])");
  // The typed request says the same conversation.
  EXPECT_EQ(call->chat.messages(0).role(), "system");
  EXPECT_EQ(call->chat.tools(0).name(), "f");
  absl::StatusOr<CompletionCall> none =
      ParseCompletionCall(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tools": []})");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->sent.tools.is_null()) << "no tools: the template sees None";
}

TEST(OpenAiRequestTest, TokenizeTakesAPromptOrMessagesAndDetokenizeTokens) {
  absl::StatusOr<TokenizeCall> prompt = ParseTokenizeCall(R"({"prompt": "hello", "add_special_tokens": false})");
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  ASSERT_TRUE(prompt->prompt.has_value());
  EXPECT_EQ(prompt->prompt->text(), "hello");
  EXPECT_FALSE(prompt->prompt->add_bos());
  absl::StatusOr<TokenizeCall> chat =
      ParseTokenizeCall(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
                            "tools": [{"type": "function", "function": {"name": "f"}}],
                            "chat_template_kwargs": {"enable_thinking": false}, "model": "m"})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  ASSERT_TRUE(chat->chat.has_value());
  EXPECT_EQ(chat->chat->messages_size(), 1);
  EXPECT_FALSE(chat->chat->add_generation_prompt());
  EXPECT_EQ(chat->chat->tools_size(), 1) << "tools reach the template through /tokenize too";
  EXPECT_EQ(chat->chat->chat_template_kwargs_json(), R"({"enable_thinking":false})");
  EXPECT_EQ(chat->chat->options().model(), "m");
  EXPECT_EQ(
      ErrorParam(ParseTokenizeCall(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{}]})").status()),
      "tools[0].function");
  EXPECT_FALSE(ParseTokenizeCall(R"({})").ok());
  EXPECT_FALSE(ParseTokenizeCall(R"({"prompt": "x", "messages": []})").ok());

  absl::StatusOr<v1::DetokenizeRequest> ids = ParseDetokenizeCall(R"({"tokens": [5, 6], "model": "m"})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->token_ids_size(), 2);
  EXPECT_EQ(ids->model(), "m");
  EXPECT_EQ(ErrorParam(ParseDetokenizeCall(R"({"tokens": ["a"]})").status()), "tokens[0]");
}

}  // namespace
}  // namespace kvfleet::router::openai
