// Both tokenizers on arbitrary text: encoding never fails on valid UTF-8
// and refuses anything else with INVALID_ARGUMENT; every id is in the
// vocabulary; byte-level BPE decodes back to exactly the text it encoded.
#include <string>

#include "model/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_tokenizers.h"

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
    fuzz::Check(*back == text, "byte-level BPE does not round-trip");
  }
  return 0;
}
