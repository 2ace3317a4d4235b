// Both tokenizers on arbitrary text: encoding never fails on valid UTF-8
// and refuses anything else with INVALID_ARGUMENT; every id is in the
// vocabulary; byte-level BPE decodes back to exactly the text it encoded,
// less the bytes the vocabulary has no token for (SmolLM2 lacks 0x04, 0x06,
// ...; Hugging Face drops those, and so does kvfleet: tests/reference/).
#include <array>
#include <map>
#include <string>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_tokenizers.h"

namespace {

// Which bytes `tok` (byte-level) can encode: those whose byte-level
// character is a token.
const std::array<bool, 256>& EncodableBytes(const kvfleet::model::Tokenizer& tok) {
  static std::map<const kvfleet::model::Tokenizer*, std::array<bool, 256>> cache;
  auto [it, added] = cache.try_emplace(&tok);
  if (added) {
    for (int b = 0; b < 256; ++b) it->second[b] = tok.FindToken(kvfleet::model::ByteLevelChar(static_cast<uint8_t>(b))).has_value();
  }
  return it->second;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  fuzz::FuzzInput in(data, size);
  const auto& tokenizers = fuzz::FuzzTokenizers();
  const model::Tokenizer& tok = *tokenizers[in.Byte() % tokenizers.size()];
  const uint8_t flags = in.Byte();
  const model::EncodeOptions options{.add_special = (flags & 1) != 0, .parse_special = (flags & 2) != 0};
  const std::string text = in.Rest();
  absl::StatusOr<std::vector<model::TokenId>> ids = tok.Encode(text, options);
  const bool valid = model::ValidateUtf8(text).ok();
  fuzz::Check(ids.ok() == valid, "Encode's verdict disagrees with UTF-8 validity: " + std::string(ids.status().message()));
  if (!ids.ok()) {
    fuzz::Check(ids.status().code() == absl::StatusCode::kInvalidArgument, "not INVALID_ARGUMENT");
    return 0;
  }
  for (model::TokenId id : *ids) fuzz::Check(id >= 0 && id < tok.vocab_size(), "an id outside the vocabulary");
  absl::StatusOr<std::string> back = tok.Decode(*ids);
  fuzz::Check(back.ok(), "Decode of Encode's ids failed");
  const bool byte_level = tok.FindToken("Ġ").has_value();
  if (byte_level && !options.add_special && !options.parse_special) {
    const std::array<bool, 256>& encodable = EncodableBytes(tok);
    std::string expected;
    for (char c : text) {
      if (encodable[static_cast<uint8_t>(c)]) expected.push_back(c);
    }
    fuzz::Check(*back == expected, "byte-level BPE does not round-trip");
  }
  return 0;
}
