// One compiled PCRE2 pattern (UTF + UCP, JIT when the library has it) that
// splits text the way Hugging Face's Split(..., behavior="isolated") does:
// every match is a piece, and so is every stretch of text between matches.
//
// Thread-safety: immutable after Create; Split may run on many threads at
// once (match data is per call).
//
//   ASSIGN_OR_RETURN(RegexSplitter digits, RegexSplitter::Create(R"(\p{N})"));
//   RETURN_IF_ERROR(digits.Split("ab12", &pieces));  // "ab", "1", "2"
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::model {

class RegexSplitter {
 public:
  static absl::StatusOr<RegexSplitter> Create(std::string_view pattern);

  // Appends the pieces of `text` (valid UTF-8, checked by the caller) to
  // `pieces`; they are views into `text` and cover it exactly, in order.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct CodeDeleter {
    void operator()(void* code) const;
  };
  RegexSplitter(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}

  std::string pattern_;
  std::unique_ptr<void, CodeDeleter> code_;  // pcre2_code_8; void keeps pcre2.h out of this header
};

}  // namespace kvfleet::model
