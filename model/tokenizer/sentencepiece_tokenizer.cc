#include "model/tokenizer/sentencepiece_tokenizer.h"

#include <cstdio>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/tokenizer/utf8.h"

namespace kvfleet::model {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // bytes of the merged piece, to recognise stale entries
  // Max-heap: higher score first; equal scores, leftmost first.
  bool operator<(const Bigram& other) const {
    if (score != other.score) return score < other.score;
    return left > other.left;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Create(Vocabulary vocab) {
  if (vocab.scores.size() != vocab.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SentencePiece vocabulary needs one score per token; it has ",
                                                   vocab.scores.size(), " scores for ", vocab.tokens.size(),
                                                   " tokens"));
  }
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer(std::move(vocab)));
  RETURN_IF_ERROR(tok->Init());
  return tok;
}

absl::Status SentencePieceTokenizer::Init() {
  RETURN_IF_ERROR(InitBase());
  byte_fallback_ = true;
  for (int b = 0; b < 256; ++b) {
    std::optional<TokenId> id = FindToken(absl::StrFormat("<0x%02X>", b));
    byte_token_[b] = id.value_or(-1);
    if (!id) byte_fallback_ = false;
  }
  return absl::OkStatus();
}

std::optional<TokenId> SentencePieceTokenizer::MergeTarget(std::string_view piece) const {
  std::optional<TokenId> id = FindToken(piece);
  if (!id) return std::nullopt;
  const TokenType t = type(*id);
  if (t == TokenType::kControl || t == TokenType::kByte || t == TokenType::kUnknown) return std::nullopt;
  return id;
}

std::vector<SentencePieceTokenizer::Symbol> SentencePieceTokenizer::Merge(std::string_view text,
                                                                          RevMerges* rev_merges) const {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = ScanUtf8(text, pos).length;  // text is valid UTF-8
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
    pos += len;
  }
  std::priority_queue<Bigram> heap;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view piece = text.substr(symbols[left].start, symbols[left].length + symbols[right].length);
    const std::optional<TokenId> id = MergeTarget(piece);
    if (!id) return;
    heap.push({vocab().scores[*id], left, right, static_cast<uint32_t>(piece.size())});
    if (type(*id) == TokenType::kUnused) {
      (*rev_merges)[piece] = {text.substr(symbols[left].start, symbols[left].length),
                              text.substr(symbols[right].start, symbols[right].length)};
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != b.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    consider(left.prev, b.left);
    consider(b.left, left.next);
  }
  return symbols;
}

absl::Status SentencePieceTokenizer::Emit(std::string_view piece, const RevMerges& rev_merges, size_t fragment_start,
                                          std::vector<TokenId>* out) const {
  if (std::optional<TokenId> id = FindToken(piece)) {
    if (type(*id) == TokenType::kUnused) {
      if (auto it = rev_merges.find(piece); it != rev_merges.end()) {
        RETURN_IF_ERROR(Emit(it->second.first, rev_merges, fragment_start, out));
        return Emit(it->second.second, rev_merges, fragment_start, out);
      }
    }
    out->push_back(*id);
    return absl::OkStatus();
  }
  // Only single characters reach here: merges produce vocabulary pieces.
  if (byte_fallback_) {
    for (char c : piece) out->push_back(byte_token_[static_cast<uint8_t>(c)]);
    return absl::OkStatus();
  }
  if (vocab().unk.has_value()) {
    // sentencepiece merges a run of unknown characters into one unk token
    // (the run never mixes with known pieces: none contains an unknown
    // character); `fragment_start` keeps the run inside this fragment.
    if (out->size() <= fragment_start || out->back() != *vocab().unk) out->push_back(*vocab().unk);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("character '", std::string(piece),
                                                 "' has no token, and the vocabulary has neither byte "
                                                 "tokens <0xXX> nor an unknown token"));
}

absl::Status SentencePieceTokenizer::EncodeFragment(std::string_view text, bool after_special,
                                                    std::vector<TokenId>* out) const {
  std::string escaped;
  escaped.reserve(text.size() + 8);
  if (vocab().add_space_prefix && after_special) escaped.append(kSpaceMark);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kSpaceMark);
    } else {
      escaped.push_back(c);
    }
  }
  RevMerges rev_merges;
  const std::vector<Symbol> symbols = Merge(escaped, &rev_merges);
  const size_t fragment_start = out->size();
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = std::string_view(escaped).substr(symbols[i].start, symbols[i].length);
    RETURN_IF_ERROR(Emit(piece, rev_merges, fragment_start, out));
  }
  return absl::OkStatus();
}

void SentencePieceTokenizer::AppendPiece(TokenId id, std::string* out) const {
  const std::string& text = vocab().tokens[id];
  switch (type(id)) {
    case TokenType::kByte: {
      unsigned value = 0;
      if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%02X>", &value) == 1) {
        out->push_back(static_cast<char>(value));
      } else {
        out->append(text);  // not of the <0xXX> form: show it as it is
      }
      return;
    }
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      out->append(text);
      return;
    default:
      for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
          out->push_back(' ');
          pos += kSpaceMark.size();
        } else {
          out->push_back(text[pos++]);
        }
      }
  }
}

}  // namespace kvfleet::model
