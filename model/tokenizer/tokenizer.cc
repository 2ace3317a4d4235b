#include "model/tokenizer/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/byte_level_bpe_tokenizer.h"
#include "model/tokenizer/sentencepiece_tokenizer.h"

namespace kvfleet::model {

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(const Vocabulary& vocab) {
  if (vocab.model == "gpt2") {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteLevelBpeTokenizer> tok, ByteLevelBpeTokenizer::Create(vocab));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (vocab.model == "llama") {
    ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceTokenizer> tok, SentencePieceTokenizer::Create(vocab));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer model '", vocab.model,
                                               "' is not supported; supported: gpt2 (byte-level BPE), "
                                               "llama (SentencePiece BPE)"));
}

}  // namespace kvfleet::model
