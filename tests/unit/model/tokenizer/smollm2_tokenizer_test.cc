// Tests on the real SmolLM2-135M-Instruct vocabulary; skipped when the model
// file has not been fetched (scripts/fetch_model.sh). Expected ids come from
// Hugging Face tokenizers (see tests/reference/tokenizer_reference.py).
#include <chrono>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/default_model.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_vocabulary.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::model {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

using ::kvfleet::testing::kDefaultModelPath;

class SmolLm2TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kvfleet::testing::DefaultModelFetched()) {
      GTEST_SKIP() << kvfleet::testing::kDefaultModelMissing;
    }
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(kDefaultModelPath);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<Vocabulary> vocab = ReadGgufVocabulary(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = *std::move(vocab);
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = CreateTokenizer(vocab_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = *std::move(tok);
  }

  std::vector<TokenId> Encode(std::string_view text, EncodeOptions options = {.parse_special = true}) {
    absl::StatusOr<std::vector<TokenId>> ids = tok_->Encode(text, options);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<TokenId>{};
  }

  Vocabulary vocab_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SmolLm2TokenizerTest, MatchesHuggingFaceIds) {
  EXPECT_THAT(Encode("Hello, world!"), ElementsAre(19556, 28, 905, 17));
  EXPECT_THAT(Encode("It's 2024 — don't panic 🚀"),
              ElementsAre(1589, 506, 216, 34, 32, 34, 36, 1841, 1326, 982, 14455, 15107, 244, 218));
  EXPECT_THAT(Encode("<|im_start|>user\nHi<|im_end|>\n"), ElementsAre(1, 4093, 198, 26843, 2, 198));
  EXPECT_THAT(Encode("  indented\n\tcode()"), ElementsAre(216, 641, 6574, 198, 197, 4635, 1000));
  EXPECT_THAT(Encode("Привет, 世界"), ElementsAre(155, 249, 46879, 16464, 32547, 28, 216, 7906, 240, 178, 239, 230));
}

TEST_F(SmolLm2TokenizerTest, SpecialTokensAndStops) {
  EXPECT_EQ(tok_->vocab_size(), 49152);
  EXPECT_EQ(tok_->eos(), 2);
  EXPECT_TRUE(tok_->IsControl(1));
  EXPECT_THAT(tok_->StopTokens(), ElementsAre(0, 2));  // <|endoftext|>, <|im_end|>
  EXPECT_THAT(Encode("<|im_start|>", {}), ::testing::Not(ElementsAre(1)));
}

TEST_F(SmolLm2TokenizerTest, ChatPromptEncodesToTheTurnTokens) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromVocabulary(vocab_);
  ASSERT_TRUE(chat.ok()) << chat.status();
  std::vector<ChatMessage> messages = {{"user", "What is 2+2?"}};
  absl::StatusOr<std::string> prompt = chat->Apply(messages, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  std::vector<TokenId> ids = Encode(*prompt);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 1);                            // <|im_start|> system ...
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);  // system, user, assistant turns
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);
  EXPECT_EQ(*tok_->Decode(ids), *prompt);
}

TEST_F(SmolLm2TokenizerTest, StreamingEqualsDecode) {
  const std::string text =
      "Emoji 👨‍👩‍👧‍👦 and 🏳️‍🌈, CJK 漢字, Thai สวัสดี, numbers 3.14159.";
  std::vector<TokenId> ids = Encode(text);
  IncrementalDetokenizer detok(*tok_);
  std::string streamed;
  for (TokenId id : ids) streamed += *detok.Push(id);
  streamed += detok.Finish();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(*tok_->Decode(ids), text);
}

TEST_F(SmolLm2TokenizerTest, EncodesALongPromptQuickly) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "The quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
  const auto start = std::chrono::steady_clock::now();
  std::vector<TokenId> ids = Encode(text);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GT(ids.size(), 20000u);
  // ~100 KB; a quadratic step anywhere would take seconds.
  EXPECT_LT(std::chrono::duration<double>(elapsed).count(), 2.0);
  EXPECT_EQ(*tok_->Decode(ids), text);
}

}  // namespace
}  // namespace kvfleet::model
