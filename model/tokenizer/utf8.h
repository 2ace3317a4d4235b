// UTF-8 scanning shared by the tokenizers, the incremental detokenizer and
// the chat templates. Validation follows Unicode Table 3-7 (no overlongs, no
// surrogates, nothing above U+10FFFF), and invalid input is measured in
// "maximal subparts" so each one becomes exactly one U+FFFD, as in WHATWG
// and Python's errors="replace".
//
//   Utf8Unit u = ScanUtf8(text, i);
//   if (u.kind == Utf8Unit::kValid) i += u.length;
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kvfleet::model {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

struct Utf8Unit {
  enum Kind { kValid, kIncomplete, kInvalid };
  Kind kind;
  // kValid: bytes of the sequence; kIncomplete: bytes present (a valid
  // prefix cut by the end of the input); kInvalid: the maximal subpart (>= 1).
  size_t length;
};

// Classifies the sequence that starts at text[pos] (pos < text.size()).
Utf8Unit ScanUtf8(std::string_view text, size_t pos);

// OK, or INVALID_ARGUMENT naming the byte offset of the first bad sequence.
absl::Status ValidateUtf8(std::string_view text);

// Decodes the valid sequence at text[pos]; returns its length (0 if not valid).
size_t DecodeUtf8(std::string_view text, size_t pos, char32_t* codepoint);

void AppendUtf8(char32_t codepoint, std::string* out);

}  // namespace kvfleet::model
