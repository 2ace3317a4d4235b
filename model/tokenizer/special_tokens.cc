#include "model/tokenizer/special_tokens.h"

#include <algorithm>

namespace kvfleet::model {

bool IsSpecialTokenType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown;
}

SpecialTokenMatcher::SpecialTokenMatcher(const Vocabulary& vocab, bool user_defined_only) {
  for (TokenId id = 0; id < vocab.size(); ++id) {
    const std::string& text = vocab.tokens[id];
    const TokenType type = vocab.token_types[id];
    if (text.empty() || !(user_defined_only ? type == TokenType::kUserDefined : IsSpecialTokenType(type))) continue;
    by_first_byte_[static_cast<unsigned char>(text[0])].push_back({text, id});
    empty_ = false;
  }
  for (auto& candidates : by_first_byte_) {
    // Longest first; among equal texts the lowest id, so the choice is stable.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
  }
}

std::vector<TextFragment> SpecialTokenMatcher::Split(std::string_view text) const {
  std::vector<TextFragment> fragments;
  size_t plain_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const Candidate* hit = nullptr;
    for (const Candidate& c : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.compare(pos, c.text.size(), c.text) == 0) {
        hit = &c;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > plain_start) fragments.push_back({text.substr(plain_start, pos - plain_start)});
    fragments.push_back({text.substr(pos, hit->text.size()), hit->id});
    pos += hit->text.size();
    plain_start = pos;
  }
  if (plain_start < text.size()) fragments.push_back({text.substr(plain_start)});
  return fragments;
}

}  // namespace kvfleet::model
