// GenerationPlan: what the router checks before asking any worker, and what
// it forwards (sampling, stopping, salt, priority, logprobs; a seed for
// unseeded sampling so a resumed stream keeps its draws).
#include "services/router/server/generation_plan.h"

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

class GenerationPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("m.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 1, .context_length = 64}, path).ok());
    model_ = *RouterModel::Load(path, "");
  }

  static v1::GenerateTextRequest Ids(std::initializer_list<int32_t> ids) {
    v1::GenerateTextRequest r;
    for (int32_t id : ids) r.add_prompt_token_ids(id);
    return r;
  }

  testing::TempDir dir_;
  std::unique_ptr<RouterModel> model_;
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
  absl::StatusOr<GenerationPlan> p = PlanGenerate(*model_, r, /*fresh_seed=*/77);
  ASSERT_TRUE(p.ok()) << p.status();
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
  EXPECT_EQ(PlanGenerate(*model_, sampled, 77)->worker_request.sampling().seed(), 77u);
  EXPECT_FALSE(PlanGenerate(*model_, Ids({5}), 77)->worker_request.sampling().has_seed());
}

TEST_F(GenerationPlanTest, MalformedRequestsAreRefusedWithTheProblemNamed) {
  auto code_and_message = [&](const v1::GenerateTextRequest& r) {
    absl::StatusOr<GenerationPlan> p = PlanGenerate(*model_, r, 1);
    return std::make_pair(p.status().code(), std::string(p.status().message()));
  };
  v1::GenerateTextRequest both = Ids({5});
  both.set_prompt("text");
  EXPECT_EQ(code_and_message(both).first, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_and_message(v1::GenerateTextRequest()).first, absl::StatusCode::kInvalidArgument);
  v1::GenerateTextRequest other_model = Ids({5});
  other_model.mutable_options()->set_model("llama-70b");
  const auto [code, message] = code_and_message(other_model);
  EXPECT_EQ(code, absl::StatusCode::kNotFound);
  EXPECT_NE(message.find("'m'"), std::string::npos) << message;
  v1::GenerateTextRequest too_long;
  for (int i = 0; i < 64; ++i) too_long.add_prompt_token_ids(5);
  EXPECT_NE(code_and_message(too_long).second.find("context of 64"), std::string::npos);
  v1::GenerateTextRequest long_id = Ids({5});
  long_id.mutable_options()->set_request_id(std::string(129, 'x'));
  EXPECT_EQ(code_and_message(long_id).first, absl::StatusCode::kInvalidArgument);
  v1::GenerateTextRequest bad_stop = Ids({5});
  bad_stop.mutable_options()->add_stop(std::string(300, 'a'));
  EXPECT_NE(code_and_message(bad_stop).second.find("options.stop"), std::string::npos);
}

TEST_F(GenerationPlanTest, ChatRendersMessagesAndHonoursAddGenerationPrompt) {
  v1::ChatRequest chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("hi");
  absl::StatusOr<GenerationPlan> with = PlanChat(*model_, chat, 1);
  chat.set_add_generation_prompt(false);
  absl::StatusOr<GenerationPlan> without = PlanChat(*model_, chat, 1);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_GT(with->prompt.size(), without->prompt.size());
  m->set_role("narrator");
  EXPECT_EQ(PlanChat(*model_, chat, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanChat(*model_, v1::ChatRequest(), 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvfleet::router
