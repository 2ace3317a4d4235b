// The public API's messages as OpenAI's bodies and server-sent events,
// parsed back as JSON so the test checks the shapes clients read.
#include "services/router/openai/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "services/router/frontend/router_model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router::openai {
namespace {

using Json = nlohmann::json;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("tiny.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 3, .context_length = 256}, path).ok());
    absl::StatusOr<std::unique_ptr<RouterModel>> m = RouterModel::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  static v1::GenerateTextResponse Message(std::string text, std::vector<int32_t> ids,
                                          v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED) {
    v1::GenerateTextResponse r;
    r.set_text(std::move(text));
    for (int32_t id : ids) {
      r.add_token_ids(id);
      v1::TokenLogprob& lp = *r.add_logprobs();
      lp.set_token_id(id);
      lp.set_logprob(-0.5f);
      for (int k = 0; k < 3; ++k) {
        v1::TopLogprob& t = *lp.add_top();
        t.set_token_id(id + k);
        t.set_logprob(-0.5f - static_cast<float>(k));
      }
    }
    r.set_finish_reason(finish);
    if (finish != v1::FINISH_REASON_UNSPECIFIED) {
      r.mutable_usage()->set_prompt_tokens(10);
      r.mutable_usage()->set_cached_prompt_tokens(4);
      r.mutable_usage()->set_generated_tokens(3);
    }
    return r;
  }

  // The JSON of each `data:` event, and whether the stream ended with [DONE].
  static std::vector<Json> Events(const std::string& sse, bool* done) {
    std::vector<Json> out;
    *done = false;
    for (absl::string_view frame : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StartsWith(frame, "data: ")) << frame;
      const std::string data(frame.substr(6));
      if (data == "[DONE]") {
        *done = true;
        continue;
      }
      EXPECT_FALSE(*done) << "an event after [DONE]";
      out.push_back(Json::parse(data));
    }
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<RouterModel> model_;
};

TEST_F(OpenAiResponseTest, AChatStreamOpensWithTheRoleAndEndsWithFinishUsageAndDone) {
  CompletionCall call;
  call.endpoint = Endpoint::kChat;
  call.stream = true;
  call.include_usage = true;
  CompletionFormatter f(call, "chatcmpl-1", 1700000000, "served", model_->tokenizer());
  std::string sse = f.StreamEvents(Message("Hel", {5}));
  sse += f.StreamEvents(Message("", {6}));  // a token that completes no character yet: no chunk
  sse += f.StreamEvents(Message("lo", {7}, v1::FINISH_REASON_LENGTH));
  sse += f.StreamEnd();
  bool done = false;
  const std::vector<Json> events = Events(sse, &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(events.size(), 5u) << sse;
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["id"], "chatcmpl-1");
  EXPECT_EQ(events[0]["model"], "served");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(events[2]["choices"][0]["delta"]["content"], "lo");
  EXPECT_TRUE(events[2]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events[3]["usage"].is_null());  // include_usage: null on every chunk but the last
  EXPECT_TRUE(events[4]["choices"].empty());
  EXPECT_EQ(events[4]["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(events[4]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(events[4]["usage"]["total_tokens"], 13);
  EXPECT_EQ(events[4]["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST_F(OpenAiResponseTest, AToolCallStreamsItsHeadThenArgumentPiecesAndAddsUpWhole) {
  CompletionCall call;
  call.endpoint = Endpoint::kChat;
  call.stream = true;
  auto piece = [](int32_t index, std::string id, std::string name, std::string args) {
    v1::GenerateTextResponse r;
    v1::ToolCallDelta& d = *r.add_tool_calls();
    d.set_index(index);
    d.set_id(std::move(id));
    d.set_name(std::move(name));
    d.set_arguments_delta(std::move(args));
    return r;
  };
  const std::vector<v1::GenerateTextResponse> pieces = {piece(0, "call_1", "get_weather", ""),
                                                        piece(0, "", "", R"({"city": )"),
                                                        piece(0, "", "", R"("Paris"})"),
                                                        piece(1, "call_2", "get_time", "{}")};
  CompletionFormatter streamed(call, "chatcmpl-t", 1, "served", model_->tokenizer());
  std::string sse;
  for (const v1::GenerateTextResponse& p : pieces) sse += streamed.StreamEvents(p);
  bool done = false;
  const std::vector<Json> events = Events(sse, &done);
  ASSERT_EQ(events.size(), 6u) << sse;  // the role, a head, two pieces, a head and its arguments
  const Json& head = events[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(head["index"], 0);
  EXPECT_EQ(head["id"], "call_1");
  EXPECT_EQ(head["type"], "function");
  EXPECT_EQ(head["function"]["name"], "get_weather");
  EXPECT_EQ(head["function"]["arguments"], "");
  const Json& more = events[3]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(more["index"], 0);
  EXPECT_FALSE(more.contains("id")) << "only a call's first delta has its id";
  EXPECT_EQ(more["function"]["arguments"], R"("Paris"})");
  EXPECT_EQ(events[4]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);

  call.stream = false;
  CompletionFormatter whole(call, "chatcmpl-t", 1, "served", model_->tokenizer());
  for (const v1::GenerateTextResponse& p : pieces) whole.Add(p);
  v1::GenerateTextResponse end;
  end.set_finish_reason(v1::FINISH_REASON_TOOL_CALLS);
  whole.Add(end);
  const Json body = Json::parse(whole.Body());
  const Json& calls = body["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u) << body.dump();
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(calls[1]["id"], "call_2");
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

TEST_F(OpenAiResponseTest, AWholeChatCarriesTheTextFinishUsageAndLogprobs) {
  CompletionCall call;
  call.endpoint = Endpoint::kChat;
  call.logprobs = true;
  call.top_logprobs = 2;
  CompletionFormatter f(call, "chatcmpl-2", 1, "served", model_->tokenizer());
  f.Add(Message("Hi", {5, 6}));
  f.Add(Message(" there", {7}, v1::FINISH_REASON_STOP));
  const Json body = Json::parse(f.Body());
  EXPECT_EQ(body["object"], "chat.completion");
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "Hi there");
  EXPECT_EQ(choice["finish_reason"], "stop");
  ASSERT_EQ(choice["logprobs"]["content"].size(), 3u);
  const Json& first = choice["logprobs"]["content"][0];
  EXPECT_FLOAT_EQ(first["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(first["top_logprobs"].size(), 2u);  // what was asked, not all the worker sent
  EXPECT_EQ(first["token"].get<std::string>(), *model_->tokenizer().TokenToPiece(5));
  EXPECT_TRUE(first["bytes"].is_array());
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
}

TEST_F(OpenAiResponseTest, CompletionsLogprobsAreColumnsWithTextOffsets) {
  CompletionCall call;
  call.endpoint = Endpoint::kCompletion;
  call.logprobs = true;
  call.top_logprobs = 1;
  CompletionFormatter f(call, "cmpl-3", 1, "served", model_->tokenizer());
  f.Add(Message("ab", {5, 6}, v1::FINISH_REASON_LENGTH));
  const Json body = Json::parse(f.Body());
  EXPECT_EQ(body["object"], "text_completion");
  const Json& lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["token_logprobs"].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["text_offset"][1], model_->tokenizer().TokenToPiece(5)->size());
  EXPECT_EQ(body["choices"][0]["text"], "ab");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAiResponseTest, TokensThatAreNotWholeCharactersStillMakeValidJson) {
  CompletionCall call;
  call.endpoint = Endpoint::kChat;
  call.logprobs = true;
  call.top_logprobs = 3;
  CompletionFormatter f(call, "chatcmpl-4", 1, "served", model_->tokenizer());
  // Every id of the vocabulary, so byte tokens that are half a character are among them.
  std::vector<int32_t> all;
  for (int32_t id = 0; id < model_->vocab_size() - 3; ++id) all.push_back(id);
  f.Add(Message("", all, v1::FINISH_REASON_STOP));
  Json parsed;
  EXPECT_NO_THROW(parsed = Json::parse(f.Body()));
  EXPECT_EQ(parsed["choices"][0]["logprobs"]["content"].size(), all.size());
}

TEST_F(OpenAiResponseTest, ErrorsHaveOpenAisShapeAndStatus) {
  const Json e = Json::parse(ErrorBody(400, "`n` is 2", "n"));
  EXPECT_EQ(e["error"]["message"], "`n` is 2");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "n");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_TRUE(Json::parse(ErrorBody(503, "down"))["error"]["param"].is_null());
  EXPECT_EQ(Json::parse(ErrorBody(429, "slow down"))["error"]["type"], "rate_limit_error");
  bool done = false;
  const std::vector<Json> events = Events(StreamErrorEvent(503, "the worker died"), &done);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["error"]["message"], "the worker died");

  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
}

TEST_F(OpenAiResponseTest, ModelsTokenizeAndHealthBodies) {
  v1::ListModelsResponse models;
  v1::ModelInfo& m = *models.add_models();
  m.set_id("served");
  m.set_max_context(256);
  const Json list = Json::parse(ModelListBody(models, 5));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], "served");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(list["data"][0]["max_model_len"], 256);
  const Json tokens = Json::parse(TokenizeBody({1, 2, 3}, 256));
  EXPECT_EQ(tokens["count"], 3);
  EXPECT_EQ(tokens["tokens"], Json::array({1, 2, 3}));
  EXPECT_EQ(Json::parse(DetokenizeBody("hi"))["prompt"], "hi");
  EXPECT_EQ(Json::parse(HealthBody(0))["status"], "no live workers");
  EXPECT_EQ(Json::parse(HealthBody(2))["live_workers"], 2);
}

}  // namespace
}  // namespace kvfleet::router::openai
