// Finds the texts of whole tokens in a prompt, so Encode can map them
// straight to their ids instead of tokenizing their characters: special
// tokens (control, user-defined and unknown, e.g. "<|im_start|>") when a
// caller parses specials, and user-defined tokens always (Gemma's "\n\n" and
// "<table>", Qwen's "<tool_call>": what Hugging Face calls non-special added
// tokens and llama.cpp always splits out). Matching is leftmost-longest, as
// Hugging Face's added-token matcher does: at the first position where any
// such text starts, the longest one that fits wins.
//
// Thread-safety: immutable after construction.
//
//   SpecialTokenMatcher matcher(vocab);
//   for (const TextFragment& f : matcher.Split("<|im_start|>user\n")) ...
#pragma once

#include <string_view>
#include <vector>

#include "model/token_id.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

// Either a special token (id >= 0, text is its text) or plain text (id < 0).
struct TextFragment {
  std::string_view text;
  TokenId id = -1;
  bool is_special() const { return id >= 0; }
};

// Whether a token type is matched as a whole in text when specials are parsed.
bool IsSpecialTokenType(TokenType type);

class SpecialTokenMatcher {
 public:
  // Every special token, or (user_defined_only) the user-defined ones.
  SpecialTokenMatcher(const Vocabulary& vocab, bool user_defined_only = false);
  bool empty() const { return empty_; }

  // Fragments of `text`, in order, covering it exactly.
  std::vector<TextFragment> Split(std::string_view text) const;

 private:
  struct Candidate {
    std::string_view text;  // into the Vocabulary, which outlives the matcher
    TokenId id;
  };
  // By first byte, longest first, so the first hit at a position is the longest.
  std::vector<Candidate> by_first_byte_[256];
  bool empty_ = true;
};

}  // namespace kvfleet::model
