// The few Unicode facts Python's str methods depend on, for UTF-8 strings:
// code points (Python indexes, slices and measures strings by them), which
// code points str.strip() and str.split() treat as whitespace, and which
// repr() prints as escapes, and simple case mapping for the alphabets
// message text commonly uses (Latin, Greek, Cyrillic); other scripts keep
// their case, which Python would change only for a few (README.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kvfleet::jinja {

// Decodes the code point at s[*pos] and advances *pos; an invalid byte
// decodes as itself (as U+0080..U+00FF would not: callers pass valid UTF-8).
char32_t DecodeCodePoint(std::string_view s, size_t* pos);
void AppendCodePoint(char32_t c, std::string* out);
// Byte offset of every code point in `s`, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(std::string_view s);
size_t CodePointCount(std::string_view s);

// Simple case mapping (no context, one code point to one, except that
// Upper maps U+00DF to "SS" as Python does).
char32_t ToLowerCodePoint(char32_t c);
char32_t ToUpperCodePoint(char32_t c);
bool IsCased(char32_t c);
std::string UnicodeUpper(std::string_view s);
std::string UnicodeLower(std::string_view s);

// Python's str.isspace() for one code point.
bool IsPythonSpace(char32_t c);
// Whether Python's repr() prints the code point as itself.
bool IsPythonPrintable(char32_t c);

// Lengths of the Python whitespace run at the start / end of `s`, in bytes.
size_t LeadingSpaceBytes(std::string_view s);
size_t TrailingSpaceBytes(std::string_view s);

}  // namespace kvfleet::jinja
