#include "model/tokenizer/byte_level.h"

#include <array>

#include "model/tokenizer/utf8.h"

namespace kvfleet::model {
namespace {

struct Alphabet {
  std::array<std::string, 256> shown;  // byte -> UTF-8 of its character
  std::array<int16_t, 512> byte_of{};  // code point (< 512) -> byte, -1 if none

  Alphabet() {
    byte_of.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      // bytes_to_unicode() in GPT-2's encoder.py: these ranges keep their own code point.
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      AppendUtf8(cp, &shown[b]);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* alphabet = new Alphabet();
  return *alphabet;
}

}  // namespace

const std::string& ByteLevelChar(uint8_t byte) { return GetAlphabet().shown[byte]; }

void ByteLevelDecode(std::string_view token_text, std::string* out) {
  const Alphabet& alphabet = GetAlphabet();
  size_t pos = 0;
  while (pos < token_text.size()) {
    char32_t cp = 0;
    size_t len = DecodeUtf8(token_text, pos, &cp);
    if (len == 0) {  // not UTF-8: keep the byte as it is
      out->push_back(token_text[pos++]);
      continue;
    }
    if (cp < alphabet.byte_of.size() && alphabet.byte_of[cp] >= 0) {
      out->push_back(static_cast<char>(alphabet.byte_of[cp]));
    } else {
      out->append(token_text.substr(pos, len));
    }
    pos += len;
  }
}

}  // namespace kvfleet::model
