// Small hand-made vocabularies for the tokenizer tests, so each test can
// say exactly which tokens and merges exist and predict the ids by hand.
//
//   Vocabulary v = ByteLevelVocabulary({"Ġ t", "h e", "Ġt he"});
//   TokenId the = Id(v, "Ġthe");
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/tokenizer.h"
#include "model/vocabulary.h"
#include "tests/testing/vocabularies.h"

namespace kvfleet::model::testing {

using kvfleet::testing::AddToken;
using kvfleet::testing::ByteId;
using kvfleet::testing::ByteLevelVocabulary;
using kvfleet::testing::SentencePieceVocabulary;

inline TokenId Id(const Vocabulary& v, std::string_view text) {
  for (TokenId i = 0; i < v.size(); ++i) {
    if (v.tokens[i] == text) return i;
  }
  ADD_FAILURE() << "no token '" << text << "' in the test vocabulary";
  return -1;
}

// Creates a tokenizer or fails the test.
inline std::unique_ptr<Tokenizer> MustCreate(const Vocabulary& v) {
  auto tok = CreateTokenizer(v);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// Encodes or fails the test.
inline std::vector<TokenId> MustEncode(const Tokenizer& tok, std::string_view text, EncodeOptions options = {}) {
  auto ids = tok.Encode(text, options);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

}  // namespace kvfleet::model::testing
