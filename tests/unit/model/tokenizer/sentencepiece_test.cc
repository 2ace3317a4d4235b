#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/unit/model/tokenizer/test_vocabularies.h"

namespace kvfleet::model {
namespace {

using ::kvfleet::model::testing::AddToken;
using ::kvfleet::model::testing::Id;
using ::kvfleet::model::testing::MustCreate;
using ::kvfleet::model::testing::MustEncode;
using ::kvfleet::model::testing::SentencePieceVocabulary;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// "▁" is U+2581, SentencePiece's visible space.
Vocabulary HelloVocabulary() {
  return SentencePieceVocabulary({{"▁", -1},
                                  {"h", -2},
                                  {"e", -2},
                                  {"l", -2},
                                  {"o", -2},
                                  {"w", -2},
                                  {"r", -2},
                                  {"d", -2},
                                  {"ll", -3},
                                  {"▁h", -4},
                                  {"▁he", -5},
                                  {"▁hell", -6},
                                  {"▁hello", -7},
                                  {"or", -8},
                                  {"▁w", -9},
                                  {"▁wor", -10},
                                  {"ld", -11},
                                  {"▁world", -12}});
}

TEST(SentencePieceTest, SpacesBecomeMarksWithAPrefix) {
  Vocabulary v = HelloVocabulary();
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "hello world"), ElementsAre(Id(v, "▁hello"), Id(v, "▁world")));
  v.add_space_prefix = false;
  EXPECT_THAT(MustEncode(*MustCreate(v), "hello"), ElementsAre(Id(v, "h"), Id(v, "e"), Id(v, "ll"), Id(v, "o")));
}

TEST(SentencePieceTest, HigherScoreMergesFirst) {
  Vocabulary ab_first = SentencePieceVocabulary({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -2}, {"bc", -3}});
  ab_first.add_space_prefix = false;
  EXPECT_THAT(MustEncode(*MustCreate(ab_first), "abc"), ElementsAre(Id(ab_first, "ab"), Id(ab_first, "c")));
  Vocabulary bc_first = SentencePieceVocabulary({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -3}, {"bc", -2}});
  bc_first.add_space_prefix = false;
  EXPECT_THAT(MustEncode(*MustCreate(bc_first), "abc"), ElementsAre(Id(bc_first, "a"), Id(bc_first, "bc")));
  // Equal scores: leftmost first.
  Vocabulary tie = SentencePieceVocabulary({{"a", -1}, {"aa", -2}});
  tie.add_space_prefix = false;
  EXPECT_THAT(MustEncode(*MustCreate(tie), "aaa"), ElementsAre(Id(tie, "aa"), Id(tie, "a")));
}

TEST(SentencePieceTest, UnknownCharactersFallBackToBytes) {
  Vocabulary v = HelloVocabulary();
  auto tok = MustCreate(v);
  // 😀 is F0 9F 98 80; byte tokens <0xXX> are ids 3 + byte.
  EXPECT_THAT(MustEncode(*tok, "h😀"), ElementsAre(Id(v, "▁h"), 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80));
  EXPECT_EQ(*tok->Decode(MustEncode(*tok, "h😀")), "h😀");
}

TEST(SentencePieceTest, WithoutByteTokensARunOfUnknownsIsOneUnk) {
  Vocabulary v = SentencePieceVocabulary({{"▁", -1}, {"x", -1}}, /*bytes=*/false);
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "xyzx"), ElementsAre(Id(v, "▁"), Id(v, "x"), 0, Id(v, "x")));
  v.unk.reset();
  absl::StatusOr<std::vector<TokenId>> ids = MustCreate(v)->Encode("y");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("no token"));
}

TEST(SentencePieceTest, UnusedPiecesAreSplitBack) {
  // "ab" is unused but scores best: it may be merged through to reach "abc",
  // yet on its own it comes out as "a" "b", as in sentencepiece.
  Vocabulary v = SentencePieceVocabulary({{"a", -5}, {"b", -5}, {"c", -5}, {"abc", -2}});
  AddToken(v, "ab", TokenType::kUnused, 0);
  v.add_space_prefix = false;
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "abc"), ElementsAre(Id(v, "abc")));
  EXPECT_THAT(MustEncode(*tok, "ab"), ElementsAre(Id(v, "a"), Id(v, "b")));
}

TEST(SentencePieceTest, ControlPiecesNeverComeFromText) {
  Vocabulary v = SentencePieceVocabulary({{"<", -1}, {"s", -1}, {">", -1}, {"<s", -1}});
  v.add_space_prefix = false;
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "<s>"), ElementsAre(Id(v, "<s"), Id(v, ">")));
  EXPECT_THAT(MustEncode(*tok, "<s>", {.parse_special = true}), ElementsAre(1));
}

TEST(SentencePieceTest, SpacePrefixAfterEverySpecialToken) {
  Vocabulary v = HelloVocabulary();
  v.add_bos = true;
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "hello</s>hello", {.add_special = true, .parse_special = true}),
              ElementsAre(1, Id(v, "▁hello"), 2, Id(v, "▁hello")));
  EXPECT_TRUE(MustEncode(*tok, "").empty());
}

TEST(SentencePieceTest, DecodeDropsTheAddedSpaceOnce) {
  Vocabulary v = HelloVocabulary();
  auto tok = MustCreate(v);
  EXPECT_EQ(*tok->Decode(MustEncode(*tok, "hello world")), "hello world");
  EXPECT_EQ(*tok->Decode(MustEncode(*tok, " hello")), " hello");
  std::vector<TokenId> with_bos = {1, Id(v, "▁hello")};
  EXPECT_EQ(*tok->Decode(with_bos, {.skip_special = true}), "hello");
  EXPECT_EQ(*tok->Decode(with_bos), "<s> hello");
  EXPECT_EQ(*tok->TokenToPiece(Id(v, "▁world")), " world");
  EXPECT_EQ(*tok->TokenToPiece(3 + 0x0A), "\n");
}

TEST(SentencePieceTest, NeedsScores) {
  Vocabulary v = HelloVocabulary();
  v.scores.clear();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = CreateTokenizer(v);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("score"));
}

TEST(SentencePieceTest, BadIdsAreInvalidArgument) {
  Vocabulary v = HelloVocabulary();
  auto tok = MustCreate(v);
  std::vector<TokenId> ids = {-3};
  absl::StatusOr<std::string> text = tok->Decode(ids);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("token id -3"));
}

}  // namespace
}  // namespace kvfleet::model
