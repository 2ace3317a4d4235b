// Small hand-made vocabularies, so a test can say exactly which tokens and
// merges exist, and a fuzzer can run both tokenizers without a model file.
//
//   model::Vocabulary v = ByteLevelVocabulary({"Ġ t", "h e", "Ġt he"});
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/tokenizer/byte_level.h"
#include "model/vocabulary.h"

namespace kvfleet::testing {

using model::TokenId;
using model::TokenType;
using model::Vocabulary;

inline void AddToken(Vocabulary& v, std::string text, TokenType type = TokenType::kNormal, float score = 0) {
  v.tokens.push_back(std::move(text));
  v.token_types.push_back(type);
  v.scores.push_back(score);
}

// gpt2-style: ids 0..2 are <|endoftext|>, <|im_start|>, <|im_end|> (control,
// EOS = <|endoftext|>), 3..258 the byte-level characters of bytes 0..255 in
// byte order, then one token per merge result, in merge order.
inline Vocabulary ByteLevelVocabulary(const std::vector<std::string>& merges, std::string pre = "gpt2") {
  Vocabulary v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  AddToken(v, "<|endoftext|>", TokenType::kControl);
  AddToken(v, "<|im_start|>", TokenType::kControl);
  AddToken(v, "<|im_end|>", TokenType::kControl);
  for (int b = 0; b < 256; ++b) AddToken(v, model::ByteLevelChar(static_cast<uint8_t>(b)));
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    AddToken(v, m.substr(0, space) + m.substr(space + 1));
  }
  v.merges = merges;
  v.eos = 0;
  v.bos = 1;
  return v;
}

inline TokenId ByteId(uint8_t b) { return 3 + b; }

// SentencePiece-style: 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), then, when
// `bytes`, <0x00>..<0xFF> (3..258), then `pieces` with their scores.
inline Vocabulary SentencePieceVocabulary(const std::vector<std::pair<std::string, float>>& pieces, bool bytes = true) {
  Vocabulary v;
  v.model = "llama";
  AddToken(v, "<unk>", TokenType::kUnknown);
  AddToken(v, "<s>", TokenType::kControl);
  AddToken(v, "</s>", TokenType::kControl);
  if (bytes) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) AddToken(v, std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::kByte);
  }
  for (const auto& [text, score] : pieces) AddToken(v, text, TokenType::kNormal, score);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_space_prefix = true;
  return v;
}

}  // namespace kvfleet::testing
