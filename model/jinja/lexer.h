// Splits template source into tokens the way jinja2's lexer does under
// Hugging Face's settings (trim_blocks, lstrip_blocks, no trailing newline
// kept), so the text between tags is exactly the text jinja2 outputs:
//   - newlines in the source become "\n"; one final newline is dropped;
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}",
//     "-}}", "-#}" all whitespace after it; "+" on either side opts out of
//     trim_blocks / lstrip_blocks;
//   - trim_blocks: the first newline after a block or comment tag goes;
//   - lstrip_blocks: whitespace from a line's start to a block or comment
//     tag goes;
//   - {% raw %} ... {% endraw %} is text; comments vanish.
// Inside tags: names, strings (Python escapes), integers and floats (with
// "_" separators, 0x/0o/0b), and operators.
//
// Thread-safety: a function of its input.
//
//   ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::jinja {

struct Token {
  enum class Type {
    kData,          // text between tags (value)
    kVariableBegin, // {{
    kVariableEnd,   // }}
    kBlockBegin,    // {%
    kBlockEnd,      // %}
    kName,
    kString,        // value: the decoded string
    kInteger,
    kFloat,
    kOperator,      // value: "+", "//", "==", "(", ...
    kEnd,
  };
  Type type;
  std::string value;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// INVALID_ARGUMENT naming the line for an unterminated tag, string or
// comment, or a character that starts no token.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace kvfleet::jinja
