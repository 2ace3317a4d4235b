// SameTokenizer: equal vocabularies pass; each kind of difference (a
// token's text, the merges, a special id, the count, the kind) is refused
// with the difference named.
#include "model/tokenizer/same_tokenizer.h"

#include <gtest/gtest.h>

#include "tests/unit/model/tokenizer/test_vocabularies.h"

namespace kvfleet::model::testing {
namespace {

Vocabulary Base() {
  Vocabulary v = ByteLevelVocabulary({"Ġ t", "h e", "Ġt he"});
  v.eos = 3;
  return v;
}

void ExpectRefused(const Vocabulary& other, const std::string& needle) {
  const absl::Status s = SameTokenizer(Base(), other);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
}

TEST(SameTokenizerTest, EqualVocabulariesAgreeWhateverTheirScoresAndTemplates) {
  Vocabulary other = Base();
  other.chat_template = "{{ messages }}";
  other.add_bos = !other.add_bos;
  EXPECT_TRUE(SameTokenizer(Base(), other).ok());
}

TEST(SameTokenizerTest, EachDifferenceIsNamed) {
  Vocabulary text = Base();
  text.tokens[5] = "zz";
  ExpectRefused(text, "token 5 is ");

  Vocabulary merges = Base();
  merges.merges[1] = "h x";
  ExpectRefused(merges, "differ at rank 1: \"h e\" in the first and \"h x\" in the second");
  merges.merges.pop_back();
  merges.merges[1] = "h e";
  ExpectRefused(merges, "differ at rank 2");

  Vocabulary eos = Base();
  eos.eos = 4;
  ExpectRefused(eos, "special token eos is 3 in the first and 4 in the second");
  eos.eos.reset();
  ExpectRefused(eos, "eos is 3 in the first and none in the second");

  Vocabulary count = Base();
  count.tokens.push_back("extra");
  ExpectRefused(count, "tokens");

  Vocabulary kind = Base();
  kind.pre = "llama-bpe";
  ExpectRefused(kind, "differ in kind");
}

}  // namespace
}  // namespace kvfleet::model::testing
