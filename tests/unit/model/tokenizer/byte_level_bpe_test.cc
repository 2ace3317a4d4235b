#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/unit/model/tokenizer/test_vocabularies.h"

namespace kvfleet::model {
namespace {

using ::kvfleet::model::testing::ByteId;
using ::kvfleet::model::testing::ByteLevelVocabulary;
using ::kvfleet::model::testing::Id;
using ::kvfleet::model::testing::MustCreate;
using ::kvfleet::model::testing::MustEncode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Ranked so that "hello" builds through "ll", "ell", "hell" and " the"
// through "Ġt", "he".
const std::vector<std::string> kMerges = {"Ġ t", "l l", "e ll", "h ell", "hell o", "h e", "Ġt he", "1 2", "' s"};

TEST(ByteLevelBpeTest, MergesWithinPreTokenizerPieces) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  auto tok = MustCreate(v);
  // "hello" and " the" are separate pieces of the GPT-2 regex.
  EXPECT_THAT(MustEncode(*tok, "hello the"), ElementsAre(Id(v, "hello"), Id(v, "Ġthe")));
  // No merge crosses a piece: "o" and " " stay apart, "x" has no merges.
  EXPECT_THAT(MustEncode(*tok, "x the"), ElementsAre(ByteId('x'), Id(v, "Ġthe")));
  EXPECT_THAT(MustEncode(*tok, "it's"), ElementsAre(ByteId('i'), ByteId('t'), Id(v, "'s")));
}

TEST(ByteLevelBpeTest, LowerRankMergesFirst) {
  // "b c" outranks "a b": "abc" -> a + bc. Swapped ranks -> ab + c.
  Vocabulary first = ByteLevelVocabulary({"b c", "a b"});
  EXPECT_THAT(MustEncode(*MustCreate(first), "abc"), ElementsAre(ByteId('a'), Id(first, "bc")));
  Vocabulary second = ByteLevelVocabulary({"a b", "b c"});
  EXPECT_THAT(MustEncode(*MustCreate(second), "abc"), ElementsAre(Id(second, "ab"), ByteId('c')));
}

TEST(ByteLevelBpeTest, EqualRanksMergeLeftmostFirst) {
  Vocabulary v = ByteLevelVocabulary({"a a"});
  EXPECT_THAT(MustEncode(*MustCreate(v), "aaa"), ElementsAre(Id(v, "aa"), ByteId('a')));
  EXPECT_THAT(MustEncode(*MustCreate(v), "aaaa"), ElementsAre(Id(v, "aa"), Id(v, "aa")));
}

TEST(ByteLevelBpeTest, SmollmSplitsEveryDigit) {
  Vocabulary gpt2 = ByteLevelVocabulary(kMerges, "gpt2");
  EXPECT_THAT(MustEncode(*MustCreate(gpt2), "12"), ElementsAre(Id(gpt2, "12")));
  Vocabulary smollm = ByteLevelVocabulary(kMerges, "smollm");
  EXPECT_THAT(MustEncode(*MustCreate(smollm), "12"), ElementsAre(ByteId('1'), ByteId('2')));
  // The digit split comes first, so a space before a digit stays apart.
  std::vector<std::string> merges = {"Ġ 1"};
  Vocabulary gpt2_space = ByteLevelVocabulary(merges, "gpt2");
  EXPECT_THAT(MustEncode(*MustCreate(gpt2_space), " 1"), ElementsAre(Id(gpt2_space, "Ġ1")));
  Vocabulary smollm_space = ByteLevelVocabulary(merges, "smollm");
  EXPECT_THAT(MustEncode(*MustCreate(smollm_space), " 1"), ElementsAre(ByteId(' '), ByteId('1')));
}

TEST(ByteLevelBpeTest, LlamaBpeLooksUpWholePiecesBeforeMerging) {
  // "abc" is a token but no merge builds it: Llama 3 (ignore_merges) takes
  // it whole, GPT-2 style merging cannot reach it.
  std::vector<std::string> merges = {"a b"};
  Vocabulary llama = ByteLevelVocabulary(merges, "llama-bpe");
  testing::AddToken(llama, "abc");
  EXPECT_THAT(MustEncode(*MustCreate(llama), "abc"), ElementsAre(Id(llama, "abc")));
  Vocabulary gpt2 = ByteLevelVocabulary(merges, "gpt2");
  testing::AddToken(gpt2, "abc");
  EXPECT_THAT(MustEncode(*MustCreate(gpt2), "abc"), ElementsAre(Id(gpt2, "ab"), ByteId('c')));
}

TEST(ByteLevelBpeTest, SpecialTokensOnlyWhenParsed) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "<|im_start|>hello<|im_end|>", {.parse_special = true}),
              ElementsAre(1, Id(v, "hello"), 2));
  std::vector<TokenId> plain = MustEncode(*tok, "<|im_start|>hello<|im_end|>");
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(1)));
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(2)));
  EXPECT_EQ(*tok->Decode(plain), "<|im_start|>hello<|im_end|>");
}

TEST(ByteLevelBpeTest, LongestSpecialTokenWins) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  testing::AddToken(v, "<|im_start|>user", TokenType::kUserDefined);
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "<|im_start|>user<|im_start|>", {.parse_special = true}),
              ElementsAre(Id(v, "<|im_start|>user"), 1));
}

// A user-defined token (Qwen's "<tool_call>", Gemma's "\n\n") is ordinary
// text that is always one token, specials parsed or not; a control token is
// whole only when specials are parsed.
TEST(ByteLevelBpeTest, UserDefinedTokensAreWholeEvenWhenSpecialsAreNotParsed) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  testing::AddToken(v, "<tool_call>", TokenType::kUserDefined);
  auto tok = MustCreate(v);
  const TokenId call = Id(v, "<tool_call>");
  EXPECT_THAT(MustEncode(*tok, "hello<tool_call>hello"), ElementsAre(Id(v, "hello"), call, Id(v, "hello")));
  EXPECT_THAT(MustEncode(*tok, "<tool_call>", {.parse_special = true}), ElementsAre(call));
  std::vector<TokenId> plain = MustEncode(*tok, "<|im_start|><tool_call>");
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(1)));
  EXPECT_EQ(plain.back(), call);
  EXPECT_EQ(*tok->Decode(plain), "<|im_start|><tool_call>");
}

TEST(ByteLevelBpeTest, AddSpecialFollowsVocabularyFlags) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  v.add_bos = true;
  v.add_eos = true;
  auto tok = MustCreate(v);
  EXPECT_THAT(MustEncode(*tok, "x", {.add_special = true}), ElementsAre(1, ByteId('x'), 0));
  EXPECT_THAT(MustEncode(*tok, "x"), ElementsAre(ByteId('x')));
}

TEST(ByteLevelBpeTest, BytesWithoutATokenAreDroppedBeforeMerging) {
  Vocabulary v = ByteLevelVocabulary({"- -"});
  v.tokens[ByteId('\x04')] = "unused-slot";  // the vocabulary lacks byte 0x04
  auto tok = MustCreate(v);
  // "-\x04-" is one pre-tokenizer piece. As in Hugging Face, the byte
  // disappears and its neighbours merge.
  EXPECT_THAT(MustEncode(*tok, "-\x04-"), ElementsAre(Id(v, "--")));
}

TEST(ByteLevelBpeTest, DecodeAndPieces) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  auto tok = MustCreate(v);
  EXPECT_EQ(*tok->TokenToPiece(Id(v, "Ġthe")), " the");
  EXPECT_EQ(*tok->TokenToPiece(1), "<|im_start|>");
  const std::string text = "hello the\n\t🚀 naïve";
  std::vector<TokenId> ids = MustEncode(*tok, text);
  EXPECT_EQ(*tok->Decode(ids), text);
  std::vector<TokenId> with_specials = {1, Id(v, "hello"), 2};
  EXPECT_EQ(*tok->Decode(with_specials), "<|im_start|>hello<|im_end|>");
  EXPECT_EQ(*tok->Decode(with_specials, {.skip_special = true}), "hello");
}

TEST(ByteLevelBpeTest, BadIdsAreInvalidArgument) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  auto tok = MustCreate(v);
  std::vector<TokenId> ids = {Id(v, "hello"), v.size()};
  absl::StatusOr<std::string> text = tok->Decode(ids);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr(std::to_string(v.size())));
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("vocabulary (size " + std::to_string(v.size())));
  EXPECT_EQ(tok->TokenToPiece(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(tok->IsControl(-1));
  EXPECT_FALSE(tok->IsControl(v.size()));
}

TEST(ByteLevelBpeTest, InvalidUtf8IsInvalidArgument) {
  auto tok = MustCreate(ByteLevelVocabulary(kMerges));
  absl::StatusOr<std::vector<TokenId>> ids = tok->Encode("ok\xC3(");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("byte offset 2"));
}

TEST(ByteLevelBpeTest, StopTokensAndControls) {
  Vocabulary v = ByteLevelVocabulary(kMerges);
  auto tok = MustCreate(v);
  EXPECT_THAT(tok->StopTokens(), ElementsAre(0, 2));  // EOS <|endoftext|>, end of turn <|im_end|>
  EXPECT_TRUE(tok->IsControl(1));
  EXPECT_FALSE(tok->IsControl(Id(v, "hello")));
  EXPECT_EQ(tok->vocab_size(), v.size());
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 0);
  EXPECT_EQ(tok->eot(), std::nullopt);
  EXPECT_EQ(tok->FindToken("Ġthe"), Id(v, "Ġthe"));
}

TEST(ByteLevelBpeTest, UnsupportedVocabulariesAreRefused) {
  Vocabulary pre = ByteLevelVocabulary(kMerges, "deepseek-coder");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = CreateTokenizer(pre);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("deepseek-coder"));
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("smollm, llama-bpe, qwen2, dbrx, default, gpt2"));

  Vocabulary model = ByteLevelVocabulary(kMerges);
  model.model = "wordpiece";
  EXPECT_EQ(CreateTokenizer(model).status().code(), absl::StatusCode::kUnimplemented);

  Vocabulary bad_merge = ByteLevelVocabulary(kMerges);
  bad_merge.merges.push_back("nospace");
  EXPECT_EQ(CreateTokenizer(bad_merge).status().code(), absl::StatusCode::kInvalidArgument);

  Vocabulary bad_eos = ByteLevelVocabulary(kMerges);
  bad_eos.eos = bad_eos.size();
  EXPECT_EQ(CreateTokenizer(bad_eos).status().code(), absl::StatusCode::kInvalidArgument);

  Vocabulary short_types = ByteLevelVocabulary(kMerges);
  short_types.token_types.pop_back();
  EXPECT_EQ(CreateTokenizer(short_types).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvfleet::model
