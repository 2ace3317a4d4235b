// Byte-level BPE (Vocabulary::model "gpt2"): GPT-2, Llama 3, SmolLM2, Qwen.
//
// Encoding a fragment: the pre-tokenizer (tokenizer.ggml.pre) splits it into
// pieces; each byte of a piece starts as the token of its byte-level
// character; merges apply by rank inside the piece (bpe_merges.h). Decoding
// maps each token's characters back to bytes.
//
// Thread-safety: immutable after Create.
//
//   ASSIGN_OR_RETURN(auto tok, ByteLevelBpeTokenizer::Create(vocab));
//   ASSIGN_OR_RETURN(auto ids, tok->Encode("Hello world"));
#pragma once

#include <array>
#include <memory>

#include "model/tokenizer/bpe_merges.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/vocab_tokenizer.h"

namespace kvfleet::model {

class ByteLevelBpeTokenizer final : public VocabTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> Create(Vocabulary vocab);

 private:
  ByteLevelBpeTokenizer(Vocabulary vocab, PreTokenizer pre) : VocabTokenizer(std::move(vocab)), pre_(std::move(pre)) {}
  absl::Status Init();

  absl::Status EncodeFragment(std::string_view text, bool after_special, std::vector<TokenId>* out) const override;
  void AppendPiece(TokenId id, std::string* out) const override;
  void EncodePiece(std::string_view piece, std::vector<TokenId>* symbols, std::vector<TokenId>* out) const;

  PreTokenizer pre_;
  BpeMerges merges_;
  // The token of each byte's byte-level character; -1 where the vocabulary
  // lacks it (SmolLM2 has none for 0x04, 0xF1, ...): such a byte is dropped,
  // as Hugging Face does without an unk token.
  std::array<TokenId, 256> byte_token_{};
};

}  // namespace kvfleet::model
