#include "model/tokenizer/utf8.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kvfleet::model {
namespace {

// Sequence length implied by a lead byte, 0 for bytes that never start one.
size_t LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// The range of the first continuation byte depends on the lead byte; this is
// what rules out overlongs, surrogates and code points above U+10FFFF.
bool FirstContinuationOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

}  // namespace

Utf8Unit ScanUtf8(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t need = LeadLength(lead);
  if (need == 0) return {Utf8Unit::kInvalid, 1};
  for (size_t k = 1; k < need; ++k) {
    if (pos + k >= text.size()) return {Utf8Unit::kIncomplete, k};
    const auto b = static_cast<uint8_t>(text[pos + k]);
    const bool ok = k == 1 ? FirstContinuationOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Utf8Unit::kInvalid, k};
  }
  return {Utf8Unit::kValid, need};
}

absl::Status ValidateUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // Fast path: ASCII is most of what prompts contain.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Unit unit = ScanUtf8(text, pos);
    if (unit.kind != Utf8Unit::kValid) {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8: ", unit.kind == Utf8Unit::kIncomplete ? "truncated" : "invalid",
                       " sequence at byte offset ", pos, " of ", text.size()));
    }
    pos += unit.length;
  }
  return absl::OkStatus();
}

size_t DecodeUtf8(std::string_view text, size_t pos, char32_t* codepoint) {
  const Utf8Unit unit = ScanUtf8(text, pos);
  if (unit.kind != Utf8Unit::kValid) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data() + pos);
  switch (unit.length) {
    case 1:
      *codepoint = p[0];
      break;
    case 2:
      *codepoint = (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
      break;
    case 3:
      *codepoint = (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
      break;
    default:
      *codepoint = (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) | (char32_t{p[2] & 0x3Fu} << 6) |
                   (p[3] & 0x3Fu);
  }
  return unit.length;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace kvfleet::model
