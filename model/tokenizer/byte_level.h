// GPT-2's byte-level alphabet: every byte 0..255 is shown as one printable
// Unicode character (printable Latin-1 bytes as themselves, the rest as
// U+0100.. in order), so byte-level BPE vocabularies store tokens as
// ordinary strings: " the" is stored as "Ġthe". The mapping is a fixed
// bijection; this file owns it and nothing else.
//
//   const std::string& shown = ByteLevelChar(' ');      // "Ġ"
//   ByteLevelDecode("Ġthe", &out);                       // appends " the"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvfleet::model {

// The UTF-8 text of the character that stands for `byte`.
const std::string& ByteLevelChar(uint8_t byte);

// Appends the bytes that `token_text` (a byte-level string) stands for.
// Characters outside the alphabet are copied as their UTF-8 bytes: they can
// only come from tokens a converter added verbatim.
void ByteLevelDecode(std::string_view token_text, std::string* out);

}  // namespace kvfleet::model
