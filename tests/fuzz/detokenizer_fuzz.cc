// The incremental detokenizer on arbitrary id sequences (ids outside the
// vocabulary included): every piece it returns is valid UTF-8, a bad id is
// refused without breaking the stream, and when the whole decoded text is
// valid UTF-8 the pieces add up to exactly Decode's result.
#include <string>
#include <vector>

#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  fuzz::FuzzInput in(data, size);
  const auto& tokenizers = fuzz::FuzzTokenizers();
  const model::Tokenizer& tok = *tokenizers[in.Byte() % tokenizers.size()];
  const model::DecodeOptions options{.skip_special = (in.Byte() & 1) != 0};
  model::IncrementalDetokenizer detok(tok, options);
  std::vector<model::TokenId> accepted;
  std::string streamed;
  while (!in.empty()) {
    // Mostly ids in range; now and then one just outside it.
    const uint32_t pick = in.Below(static_cast<uint32_t>(tok.vocab_size()) + 4);
    const model::TokenId id = pick < static_cast<uint32_t>(tok.vocab_size()) ? static_cast<model::TokenId>(pick)
                              : pick % 2 ? -1 - static_cast<model::TokenId>(pick % 3)
                                         : static_cast<model::TokenId>(pick);
    absl::StatusOr<std::string> piece = detok.Push(id);
    if (!piece.ok()) {
      fuzz::Check(id < 0 || id >= tok.vocab_size(), "a valid id refused: " + std::string(piece.status().message()));
      continue;
    }
    fuzz::Check(model::ValidateUtf8(*piece).ok(), "a piece that is not valid UTF-8");
    streamed += *piece;
    accepted.push_back(id);
  }
  const std::string tail = detok.Finish();
  fuzz::Check(model::ValidateUtf8(tail).ok(), "Finish is not valid UTF-8");
  streamed += tail;
  absl::StatusOr<std::string> whole = tok.Decode(accepted, options);
  fuzz::Check(whole.ok(), "Decode of accepted ids failed");
  if (model::ValidateUtf8(*whole).ok()) fuzz::Check(streamed == *whole, "the pieces differ from Decode");
  return 0;
}
