// GenerationPlan: what the router checks before asking any worker, and what
// it forwards (sampling, stopping, salt, priority, logprobs; a seed for
// unseeded sampling so a resumed stream keeps its draws).
#include "services/router/server/generation_plan.h"

#include <gtest/gtest.h>

#include <functional>

#include "model/gguf/gguf_writer.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

class GenerationPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("m.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 1, .context_length = 64}, path).ok());
    model_ = ServedModel{.model = *RouterModel::Load(path), .fingerprint = "f"};
  }

  static v1::GenerateTextRequest Ids(std::initializer_list<int32_t> ids) {
    v1::GenerateTextRequest r;
    for (int32_t id : ids) r.add_prompt_token_ids(id);
    return r;
  }

  testing::TempDir dir_;
  ServedModel model_;
};

TEST_F(GenerationPlanTest, OptionsAreForwardedToTheWorkerRequest) {
  v1::GenerateTextRequest r = Ids({5, 6, 7});
  v1::GenerationOptions& o = *r.mutable_options();
  o.set_model("m");
  o.mutable_sampling()->set_temperature(0.5f);
  o.mutable_sampling()->set_seed(9);
  o.mutable_stopping()->set_max_tokens(12);
  o.mutable_stopping()->add_stop_token_ids(3);
  o.add_stop("END");
  o.set_cache_salt("tenant-a");
  o.set_priority(2);
  o.set_request_id("req-1");
  o.set_logprobs(true);
  o.set_top_logprobs(3);
  absl::StatusOr<GenerationPlan> p = PlanGenerate(model_, r, /*fresh_seed=*/77);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model.model, model_.model) << "the plan goes to the model it was tokenized for";
  EXPECT_EQ(p->model.fingerprint, "f");
  EXPECT_EQ(p->prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(p->stop_strings, (std::vector<std::string>{"END"}));
  const v1::GenerateRequest& w = p->worker_request;
  EXPECT_EQ(w.prompt_token_ids_size(), 3);
  EXPECT_EQ(w.sampling().seed(), 9u);  // the caller's seed wins
  EXPECT_EQ(w.stopping().max_tokens(), 12);
  EXPECT_EQ(w.stopping().stop_token_ids(0), 3);
  EXPECT_EQ(w.cache_salt(), "tenant-a");
  EXPECT_EQ(w.priority(), 2);
  EXPECT_EQ(w.request_id(), "req-1");
  EXPECT_TRUE(w.logprobs());
  EXPECT_EQ(w.top_logprobs(), 3);
  EXPECT_EQ(w.resumed_output_token_ids_size(), 0);
}

TEST_F(GenerationPlanTest, UnseededSamplingGetsTheRoutersSeedAndGreedyNone) {
  v1::GenerateTextRequest sampled = Ids({5});
  sampled.mutable_options()->mutable_sampling()->set_temperature(1.0f);
  EXPECT_EQ(PlanGenerate(model_, sampled, 77)->worker_request.sampling().seed(), 77u);
  EXPECT_FALSE(PlanGenerate(model_, Ids({5}), 77)->worker_request.sampling().has_seed());
}

TEST_F(GenerationPlanTest, MalformedRequestsAreRefusedWithTheProblemNamed) {
  auto code_and_message = [&](const v1::GenerateTextRequest& r) {
    absl::StatusOr<GenerationPlan> p = PlanGenerate(model_, r, 1);
    return std::make_pair(p.status().code(), std::string(p.status().message()));
  };
  v1::GenerateTextRequest both = Ids({5});
  both.set_prompt("text");
  EXPECT_EQ(code_and_message(both).first, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_and_message(v1::GenerateTextRequest()).first, absl::StatusCode::kInvalidArgument);
  v1::GenerateTextRequest too_long;
  for (int i = 0; i < 64; ++i) too_long.add_prompt_token_ids(5);
  EXPECT_NE(code_and_message(too_long).second.find("context of 64"), std::string::npos);
  v1::GenerateTextRequest long_id = Ids({5});
  long_id.mutable_options()->set_request_id(std::string(129, 'x'));
  EXPECT_EQ(code_and_message(long_id).first, absl::StatusCode::kInvalidArgument);
  v1::GenerateTextRequest bad_stop = Ids({5});
  bad_stop.mutable_options()->add_stop(std::string(300, 'a'));
  EXPECT_NE(code_and_message(bad_stop).second.find("stop[0] is 300 bytes"), std::string::npos);
}

// The router's whole limits table, each value one over its (lowered) limit:
// refused before any worker is asked, the flag named.
TEST_F(GenerationPlanTest, EachLimitOneOverIsRefusedNamingItsFlag) {
  const limits::RequestLimits l{.max_prompt_tokens = 4,
                                .max_output_tokens = 8,
                                .max_stop_strings = 2,
                                .max_stop_string_bytes = 3,
                                .max_stop_token_ids = 2,
                                .max_top_logprobs = 2,
                                .max_request_id_bytes = 4,
                                .max_cache_salt_bytes = 4,
                                .max_priority = 3,
                                .max_chat_messages = 2,
                                .max_prompt_bytes = 10};
  const std::vector<std::pair<std::string, std::function<void(v1::GenerationOptions&)>>> over_options = {
      {"--max-output-tokens", [](auto& o) { o.mutable_stopping()->set_max_tokens(9); }},
      {"--max-stop-strings", [](auto& o) { o.add_stop("a"), o.add_stop("b"), o.add_stop("c"); }},
      {"--max-stop-string-bytes", [](auto& o) { o.add_stop("abcd"); }},
      {"--max-stop-token-ids",
       [](auto& o) {
         for (int i = 0; i < 3; ++i) o.mutable_stopping()->add_stop_token_ids(1);
       }},
      {"--max-top-logprobs", [](auto& o) { o.set_top_logprobs(3); }},
      {"--max-request-id-bytes", [](auto& o) { o.set_request_id("12345"); }},
      {"--max-cache-salt-bytes", [](auto& o) { o.set_cache_salt("12345"); }},
      {"--max-priority", [](auto& o) { o.set_priority(4); }},
  };
  for (const auto& [flag, make_over] : over_options) {
    SCOPED_TRACE(flag);
    v1::GenerateTextRequest r = Ids({5});
    ASSERT_TRUE(PlanGenerate(model_, r, 1, l).ok());
    make_over(*r.mutable_options());
    const absl::Status s = PlanGenerate(model_, r, 1, l).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(flag), std::string::npos) << s;
  }
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_TRUE(PlanGenerate(model_, Ids({5, 5, 5, 5}), 1, l).ok());
  EXPECT_NE(message(PlanGenerate(model_, Ids({5, 5, 5, 5, 5}), 1, l).status()).find("--max-prompt-tokens"),
            std::string::npos);
  v1::GenerateTextRequest text;
  text.set_prompt("12345678901");
  EXPECT_NE(message(PlanGenerate(model_, text, 1, l).status()).find("--max-prompt-bytes"), std::string::npos);
  v1::ChatRequest chat;
  for (const char* content : {"12345", "67890"}) {
    v1::ChatMessage* m = chat.add_messages();
    m->set_role("user");
    m->set_content(content);
  }
  limits::RequestLimits roomy = l;
  roomy.max_prompt_tokens = 0;
  EXPECT_TRUE(PlanChat(model_, chat, 1, roomy).ok()) << PlanChat(model_, chat, 1, roomy).status();
  chat.mutable_messages(1)->set_content("678901");
  EXPECT_NE(message(PlanChat(model_, chat, 1, roomy).status()).find("--max-prompt-bytes"), std::string::npos);
  chat.mutable_messages(1)->set_content("6");
  *chat.add_messages() = chat.messages(0);
  EXPECT_NE(message(PlanChat(model_, chat, 1, roomy).status()).find("--max-chat-messages"), std::string::npos);
  // prompt + max_tokens within the context of 64
  v1::GenerateTextRequest sum;
  for (int i = 0; i < 60; ++i) sum.add_prompt_token_ids(5);
  sum.mutable_options()->mutable_stopping()->set_max_tokens(4);
  EXPECT_TRUE(PlanGenerate(model_, sum, 1).ok());
  sum.mutable_options()->mutable_stopping()->set_max_tokens(5);
  EXPECT_NE(message(PlanGenerate(model_, sum, 1).status()).find("65 exceeds the model's context of 64"),
            std::string::npos);
}

TEST_F(GenerationPlanTest, ChatRendersMessagesAndHonoursAddGenerationPrompt) {
  v1::ChatRequest chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("hi");
  absl::StatusOr<GenerationPlan> with = PlanChat(model_, chat, 1);
  chat.set_add_generation_prompt(false);
  absl::StatusOr<GenerationPlan> without = PlanChat(model_, chat, 1);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_GT(with->prompt.size(), without->prompt.size());
  m->set_role("narrator");
  EXPECT_EQ(PlanChat(model_, chat, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanChat(model_, v1::ChatRequest(), 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// A template that teaches Hermes-style calls, as Qwen2.5's does.
constexpr char kHermesTemplate[] =
    "{% if tools %}<tools>{{ tools | tojson }}</tools> Answer with <tool_call>{}</tool_call>.{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST_F(GenerationPlanTest, ToolChoiceDecidesHowCallsAreEnforcedAndStreamed) {
  model::GgufWriter writer;
  ASSERT_TRUE(tools::BuildTinyModel({.seed = 1, .context_length = 1024}, writer).ok());
  writer.SetString("tokenizer.chat_template", kHermesTemplate);
  ASSERT_TRUE(writer.WriteFile(dir_.Path("hermes.gguf")).ok());
  absl::StatusOr<std::unique_ptr<RouterModel>> hermes = RouterModel::Load(dir_.Path("hermes.gguf"));
  ASSERT_TRUE(hermes.ok()) << hermes.status();
  const ServedModel served{.model = *std::move(hermes)};
  v1::ChatRequest chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("weather?");
  v1::Tool* tool = chat.add_tools();
  tool->set_name("get_weather");
  tool->set_parameters_json(R"({"type": "object"})");
  chat.add_tools()->set_name("get_time");

  // auto: free text, each call enforced once started; the calls stream.
  absl::StatusOr<GenerationPlan> automatic = PlanChat(served, chat, 1);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  const v1::ToolCallConstraint& lazy = automatic->worker_request.constraint().tool_calls();
  EXPECT_TRUE(lazy.triggered());
  EXPECT_EQ(lazy.format(), "hermes");
  EXPECT_EQ(lazy.tools_size(), 2);
  EXPECT_TRUE(automatic->chat_output.stream_call_arguments);

  // A named function: one call to it, enforced from the first token.
  chat.mutable_tool_choice()->set_mode(v1::ToolChoice::FUNCTION);
  chat.mutable_tool_choice()->set_function_name("get_time");
  absl::StatusOr<GenerationPlan> named = PlanChat(served, chat, 1);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_FALSE(named->worker_request.constraint().tool_calls().triggered());
  ASSERT_EQ(named->worker_request.constraint().tool_calls().tools_size(), 1);
  EXPECT_EQ(named->worker_request.constraint().tool_calls().tools(0).name(), "get_time");

  // none: no constraint, nothing parsed.
  chat.mutable_tool_choice()->set_mode(v1::ToolChoice::NONE);
  absl::StatusOr<GenerationPlan> none = PlanChat(served, chat, 1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->worker_request.has_constraint());
  EXPECT_FALSE(none->chat_output.parse_tools);

  // auto beside a response_format: the response format is the constraint,
  // and calls are parsed as written (whole).
  chat.mutable_tool_choice()->set_mode(v1::ToolChoice::AUTO);
  chat.mutable_options()->mutable_constraint()->set_regex("[a-z]+");
  absl::StatusOr<GenerationPlan> formatted = PlanChat(served, chat, 1);
  ASSERT_TRUE(formatted.ok()) << formatted.status();
  EXPECT_EQ(formatted->worker_request.constraint().regex(), "[a-z]+");
  EXPECT_FALSE(formatted->chat_output.stream_call_arguments);

  // A model whose template teaches no call format: auto parses nothing and
  // enforces nothing.
  chat.mutable_options()->clear_constraint();
  absl::StatusOr<GenerationPlan> plain = PlanChat(model_, chat, 1);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->worker_request.has_constraint());
}

}  // namespace
}  // namespace kvfleet::router
