#include "model/tokenizer/byte_level_bpe_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/byte_level.h"

namespace kvfleet::model {

absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::Create(Vocabulary vocab) {
  ASSIGN_OR_RETURN(PreTokenizer pre, vocab.pre_patterns.empty()
                                         ? PreTokenizer::Create(vocab.pre.empty() ? "default" : vocab.pre)
                                         : PreTokenizer::FromPatterns(vocab.pre_patterns, vocab.ignore_merges));
  std::unique_ptr<ByteLevelBpeTokenizer> tok(new ByteLevelBpeTokenizer(std::move(vocab), std::move(pre)));
  RETURN_IF_ERROR(tok->Init());
  return tok;
}

absl::Status ByteLevelBpeTokenizer::Init() {
  RETURN_IF_ERROR(InitBase());
  for (int b = 0; b < 256; ++b) byte_token_[b] = FindToken(ByteLevelChar(static_cast<uint8_t>(b))).value_or(-1);
  const std::vector<std::string>& merges = vocab().merges;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& merge = merges[i];
    // Search from 1: a part never is empty, and this keeps a (theoretical)
    // left part that is a literal space intact.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE merge ", i, " '", merge, "' is not of the form 'left right'"));
    }
    const std::string_view left = std::string_view(merge).substr(0, space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    const std::optional<TokenId> l = FindToken(left), r = FindToken(right);
    const std::optional<TokenId> m = FindToken(std::string(left) + std::string(right));
    // A merge whose parts or result are not tokens can never fire, or could
    // not be emitted; converters do leave a few such lines.
    if (!l || !r || !m) continue;
    merges_.Add(*l, *r, *m);
  }
  return absl::OkStatus();
}

absl::Status ByteLevelBpeTokenizer::EncodeFragment(std::string_view text, bool /*after_special*/,
                                                   std::vector<TokenId>* out) const {
  std::vector<std::string_view> pieces;
  RETURN_IF_ERROR(pre_.Split(text, &pieces));
  std::vector<TokenId> symbols;
  for (std::string_view piece : pieces) EncodePiece(piece, &symbols, out);
  return absl::OkStatus();
}

void ByteLevelBpeTokenizer::EncodePiece(std::string_view piece, std::vector<TokenId>* symbols,
                                        std::vector<TokenId>* out) const {
  if (pre_.ignore_merges()) {
    std::string shown;
    for (char c : piece) shown += ByteLevelChar(static_cast<uint8_t>(c));
    // Only text tokens: a control token's text must not come out of plain text.
    if (std::optional<TokenId> whole = FindToken(shown); whole && !IsSpecialTokenType(type(*whole))) {
      out->push_back(*whole);
      return;
    }
  }
  symbols->clear();
  for (char c : piece) {
    // A byte without a token is left out before merging, so its neighbours
    // may merge across it (Hugging Face's BPE without an unk token does this).
    if (const TokenId id = byte_token_[static_cast<uint8_t>(c)]; id >= 0) symbols->push_back(id);
  }
  merges_.Apply(*symbols, out);
}

void ByteLevelBpeTokenizer::AppendPiece(TokenId id, std::string* out) const {
  const std::string& text = vocab().tokens[id];
  // Control and user-defined tokens are stored as their raw text.
  if (IsSpecialTokenType(type(id))) {
    out->append(text);
  } else {
    ByteLevelDecode(text, out);
  }
}

}  // namespace kvfleet::model
