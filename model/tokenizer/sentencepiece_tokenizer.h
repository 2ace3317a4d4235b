// SentencePiece-style BPE (Vocabulary::model "llama"): Llama 2, Mistral,
// and models trained with the sentencepiece library's BPE.
//
// Encoding a fragment: spaces become "▁" (U+2581), with one "▁" in front at
// the start of the text and after each special token when add_space_prefix
// is set (llama.cpp's rule). The text starts as one symbol per character;
// repeatedly the adjacent pair whose concatenation is the vocabulary piece
// with the highest score merges (ties: leftmost first). A final symbol that
// is not a piece is a character outside the vocabulary: it becomes its
// UTF-8 bytes as <0xXX> tokens (byte fallback), or, when the vocabulary has
// no byte tokens, the unk token (one per run of such characters, as
// sentencepiece does). Unused pieces may be merged through but
// are then split back into their halves, as in sentencepiece.
//
// Thread-safety: immutable after Create.
//
//   ASSIGN_OR_RETURN(auto tok, SentencePieceTokenizer::Create(vocab));
//   ASSIGN_OR_RETURN(auto ids, tok->Encode("Hello world"));  // "▁Hello", "▁world"
#pragma once

#include <array>
#include <memory>

#include "model/tokenizer/text_map.h"
#include "model/tokenizer/vocab_tokenizer.h"

namespace kvfleet::model {

class SentencePieceTokenizer final : public VocabTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Create(Vocabulary vocab);

 private:
  struct Symbol {
    uint32_t start;   // byte offset in the escaped text
    uint32_t length;  // 0 once merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  using RevMerges = TextViewMap<std::pair<std::string_view, std::string_view>>;

  explicit SentencePieceTokenizer(Vocabulary vocab) : VocabTokenizer(std::move(vocab)) {}
  absl::Status Init();

  absl::Status EncodeFragment(std::string_view text, bool after_special, std::vector<TokenId>* out) const override;
  void AppendPiece(TokenId id, std::string* out) const override;
  bool DropsSpacePrefix() const override { return vocab().add_space_prefix; }

  // The id a merge may produce for `piece`, if any (normal, user-defined,
  // unused or undefined pieces; never control, byte or unknown).
  std::optional<TokenId> MergeTarget(std::string_view piece) const;
  std::vector<Symbol> Merge(std::string_view text, RevMerges* rev_merges) const;
  absl::Status Emit(std::string_view piece, const RevMerges& rev_merges, size_t fragment_start,
                    std::vector<TokenId>* out) const;

  // <0xXX> token of each byte; -1 where missing. byte_fallback_ when all 256 exist.
  std::array<TokenId, 256> byte_token_{};
  bool byte_fallback_ = false;
};

}  // namespace kvfleet::model
