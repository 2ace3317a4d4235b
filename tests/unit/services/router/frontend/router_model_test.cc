// RouterModel on a tiny model the test writes: the id the workers would
// use, the context, chat rendering through the template, prompt encoding,
// vocabulary checks, and a clear error for a file that is not a model.
#include "services/router/frontend/router_model.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

class RouterModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Path("tiny-chat.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 2, .context_length = 512}, path_).ok());
    absl::StatusOr<std::unique_ptr<RouterModel>> m = RouterModel::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<RouterModel> model_;
};

TEST_F(RouterModelTest, TheIdIsTheFileStemLikeTheWorkersUnlessGiven) {
  EXPECT_EQ(model_->id(), "tiny-chat");
  absl::StatusOr<std::unique_ptr<RouterModel>> named = RouterModel::Load(path_, {.model_id = "custom"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ((*named)->id(), "custom");
  EXPECT_EQ(model_->context_length(), 512);
  EXPECT_EQ(model_->served_name(), "tiny-chat");  // the id unless given
  absl::StatusOr<std::unique_ptr<RouterModel>> served = RouterModel::Load(path_, {.served_name = "smollm2"});
  ASSERT_TRUE(served.ok());
  EXPECT_EQ((*served)->id(), "tiny-chat");  // the block hashes' seed stays the workers'
  EXPECT_EQ((*served)->served_name(), "smollm2");
}

TEST_F(RouterModelTest, ChatRendersTheTemplateWithItsControlTokens) {
  const std::vector<model::ChatMessage> messages = {{.role = "user", .content = "hi"}};
  absl::StatusOr<std::vector<model::TokenId>> chat = model_->EncodeChat(messages, true);
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<std::vector<model::TokenId>> expected =
      model_->tokenizer().Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", {.parse_special = true});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(*chat, *expected);
  EXPECT_FALSE(model_->EncodeChat({}, true).ok());
}

TEST_F(RouterModelTest, RawPromptsKeepControlTokenTextsAsPlainText) {
  absl::StatusOr<std::vector<model::TokenId>> ids = model_->EncodePrompt("<|im_start|>");
  ASSERT_TRUE(ids.ok());
  const std::optional<model::TokenId> control = model_->tokenizer().FindToken("<|im_start|>");
  ASSERT_TRUE(control.has_value());
  EXPECT_GT(ids->size(), 1u);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), *control), 0);
}

TEST_F(RouterModelTest, TokenIdsOutsideTheVocabularyAreNamed) {
  EXPECT_TRUE(model_->CheckTokenIds(std::vector<int32_t>{0, 5, model_->vocab_size() - 1}, "ids").ok());
  const absl::Status s = model_->CheckTokenIds(std::vector<int32_t>{1, -2}, "prompt_token_ids");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt_token_ids[1] is -2"), std::string::npos) << s;
}

TEST_F(RouterModelTest, AFileThatIsNotAModelFailsNamingIt) {
  const std::string bad = dir_.Path("bad.gguf");
  std::ofstream(bad) << "not a gguf file at all";
  absl::StatusOr<std::unique_ptr<RouterModel>> m = RouterModel::Load(bad);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("bad.gguf"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace kvfleet::router
