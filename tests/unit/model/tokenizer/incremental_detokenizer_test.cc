#include "model/tokenizer/incremental_detokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/utf8.h"
#include "tests/unit/model/tokenizer/test_vocabularies.h"

namespace kvfleet::model {
namespace {

using ::kvfleet::model::testing::ByteId;
using ::kvfleet::model::testing::ByteLevelVocabulary;
using ::kvfleet::model::testing::Id;
using ::kvfleet::model::testing::MustCreate;
using ::kvfleet::model::testing::MustEncode;
using ::kvfleet::model::testing::SentencePieceVocabulary;

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

// Pushes every id, checking that no delta carries a broken character.
std::vector<std::string> PushAll(IncrementalDetokenizer& detok, const std::vector<TokenId>& ids) {
  std::vector<std::string> deltas;
  for (TokenId id : ids) {
    absl::StatusOr<std::string> delta = detok.Push(id);
    EXPECT_TRUE(delta.ok()) << delta.status();
    EXPECT_TRUE(ValidateUtf8(*delta).ok()) << "broken UTF-8 in a delta";
    deltas.push_back(*delta);
  }
  return deltas;
}

TEST(IncrementalDetokenizerTest, EmojiSplitOverByteTokensComesOutWhole) {
  auto tok = MustCreate(ByteLevelVocabulary({}));
  // 👋🏽 is F0 9F 91 8B F0 9F 8F BD: eight byte tokens, no merges.
  absl::StatusOr<std::vector<TokenId>> ids = tok->Encode("a👋🏽");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 9u);
  IncrementalDetokenizer detok(*tok);
  std::vector<std::string> deltas = PushAll(detok, *ids);
  EXPECT_THAT(deltas, ::testing::ElementsAre("a", "", "", "", "👋", "", "", "", "🏽"));
  EXPECT_EQ(detok.Finish(), "");
}

TEST(IncrementalDetokenizerTest, HoldsAnUnfinishedCharacterUntilFinish) {
  auto tok = MustCreate(ByteLevelVocabulary({}));
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(*detok.Push(ByteId(0xE2)), "");
  EXPECT_EQ(*detok.Push(ByteId(0x82)), "");
  EXPECT_EQ(detok.pending_bytes(), 2u);
  EXPECT_EQ(detok.Finish(), kFffd);
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(IncrementalDetokenizerTest, InvalidBytesBecomeReplacementAtOnce) {
  auto tok = MustCreate(ByteLevelVocabulary({}));
  IncrementalDetokenizer detok(*tok);
  // A lone continuation byte can never be completed: it is sent right away.
  EXPECT_EQ(*detok.Push(ByteId(0x80)), kFffd);
  // E2 followed by 'x': E2 is a broken sequence, 'x' is fine.
  EXPECT_EQ(*detok.Push(ByteId(0xE2)), "");
  EXPECT_EQ(*detok.Push(ByteId('x')), std::string(kFffd) + "x");
  // An overlong lead (C0) is invalid by itself.
  EXPECT_EQ(*detok.Push(ByteId(0xC0)), kFffd);
  EXPECT_EQ(detok.Finish(), "");
}

TEST(IncrementalDetokenizerTest, BadIdLeavesTheStreamIntact) {
  auto tok = MustCreate(ByteLevelVocabulary({}));
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(*detok.Push(ByteId(0xC3)), "");
  absl::StatusOr<std::string> bad = detok.Push(tok->vocab_size() + 5);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*detok.Push(ByteId(0xA9)), "é");
}

TEST(IncrementalDetokenizerTest, ConcatenationEqualsDecode) {
  Vocabulary v = ByteLevelVocabulary({"Ġ t", "h e", "Ġt he", "ð Ł"});
  auto tok = MustCreate(v);
  const std::string text = "<|im_start|>the 🚀 naïve 日本 Ω<|im_end|>";
  absl::StatusOr<std::vector<TokenId>> ids = tok->Encode(text, {.parse_special = true});
  ASSERT_TRUE(ids.ok());
  for (bool skip : {false, true}) {
    IncrementalDetokenizer detok(*tok, {.skip_special = skip});
    std::string streamed;
    for (const std::string& d : PushAll(detok, *ids)) streamed += d;
    streamed += detok.Finish();
    EXPECT_EQ(streamed, *tok->Decode(*ids, {.skip_special = skip}));
  }
}

TEST(IncrementalDetokenizerTest, SentencePieceDropsOnlyTheFirstSpace) {
  Vocabulary v = SentencePieceVocabulary({{"▁", -1}, {"a", -1}, {"▁a", -2}});
  auto tok = MustCreate(v);
  for (std::string_view text : {"a a", " a", "a😀a"}) {
    absl::StatusOr<std::vector<TokenId>> ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok());
    IncrementalDetokenizer detok(*tok);
    std::string streamed;
    for (const std::string& d : PushAll(detok, *ids)) streamed += d;
    streamed += detok.Finish();
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(*tok->Decode(*ids), text);
  }
}

}  // namespace
}  // namespace kvfleet::model
