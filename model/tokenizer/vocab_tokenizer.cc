#include "model/tokenizer/vocab_tokenizer.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/utf8.h"

namespace kvfleet::model {
namespace {

// Control tokens that end a turn or a text in the chat formats kvfleet
// serves; generation stops on them even where the GGUF names only one EOS.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<end_of_turn>",
};

absl::Status CheckOptionalId(const std::optional<TokenId>& id, std::string_view what, int32_t size) {
  if (id.has_value() && (*id < 0 || *id >= size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary ", std::string(what), " id ", *id, " is outside the vocabulary of ", size, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

VocabTokenizer::VocabTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {}

absl::Status VocabTokenizer::InitBase() {
  const int32_t n = vocab_.size();
  if (n == 0) return absl::InvalidArgumentError("vocabulary has no tokens");
  if (vocab_.token_types.empty()) vocab_.token_types.assign(n, TokenType::kNormal);
  if (static_cast<int32_t>(vocab_.token_types.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", vocab_.token_types.size(), " token types for ", n, " tokens"));
  }
  if (!vocab_.scores.empty() && static_cast<int32_t>(vocab_.scores.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", vocab_.scores.size(), " scores for ", n, " tokens"));
  }
  RETURN_IF_ERROR(CheckOptionalId(vocab_.bos, "BOS", n));
  RETURN_IF_ERROR(CheckOptionalId(vocab_.eos, "EOS", n));
  RETURN_IF_ERROR(CheckOptionalId(vocab_.eot, "EOT", n));
  RETURN_IF_ERROR(CheckOptionalId(vocab_.unk, "UNK", n));
  RETURN_IF_ERROR(CheckOptionalId(vocab_.pad, "PAD", n));

  by_text_.reserve(n);
  // On duplicate texts the last id wins, as in llama.cpp and in a
  // tokenizer.json vocab built from the same list.
  for (TokenId id = 0; id < n; ++id) by_text_[vocab_.tokens[id]] = id;
  specials_ = std::make_unique<SpecialTokenMatcher>(vocab_);
  user_defined_ = std::make_unique<SpecialTokenMatcher>(vocab_, /*user_defined_only=*/true);

  for (const auto& id : {vocab_.eos, vocab_.eot}) {
    if (id.has_value()) stop_tokens_.push_back(*id);
  }
  for (std::string_view text : kEndOfTurnTexts) {
    auto it = by_text_.find(text);
    if (it != by_text_.end() && IsControl(it->second)) stop_tokens_.push_back(it->second);
  }
  std::sort(stop_tokens_.begin(), stop_tokens_.end());
  stop_tokens_.erase(std::unique(stop_tokens_.begin(), stop_tokens_.end()), stop_tokens_.end());
  return absl::OkStatus();
}

absl::Status VocabTokenizer::CheckId(TokenId id) const {
  if (id < 0 || id >= vocab_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is outside the vocabulary (size ", vocab_.size(), ")"));
  }
  return absl::OkStatus();
}

bool VocabTokenizer::IsControl(TokenId id) const {
  return id >= 0 && id < vocab_.size() && vocab_.token_types[id] == TokenType::kControl;
}

std::optional<TokenId> VocabTokenizer::FindToken(std::string_view text) const {
  auto it = by_text_.find(text);
  if (it == by_text_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::vector<TokenId>> VocabTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_special && vocab_.add_bos && vocab_.bos.has_value()) ids.push_back(*vocab_.bos);
  const SpecialTokenMatcher& whole = options.parse_special ? *specials_ : *user_defined_;
  if (!whole.empty()) {
    bool after_special = true;
    for (const TextFragment& fragment : whole.Split(text)) {
      if (fragment.is_special()) {
        ids.push_back(fragment.id);
        after_special = true;
      } else {
        RETURN_IF_ERROR(EncodeFragment(fragment.text, after_special, &ids));
        after_special = false;
      }
    }
  } else if (!text.empty()) {
    RETURN_IF_ERROR(EncodeFragment(text, /*after_special=*/true, &ids));
  }
  if (options.add_special && vocab_.add_eos && vocab_.eos.has_value()) ids.push_back(*vocab_.eos);
  return ids;
}

absl::Status VocabTokenizer::AppendDecoded(TokenId id, const DecodeOptions& options, DecodeState* state,
                                           std::string* out) const {
  RETURN_IF_ERROR(CheckId(id));
  const TokenType t = type(id);
  if (options.skip_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return absl::OkStatus();
  const size_t start = out->size();
  AppendPiece(id, out);
  // Only a text token's space can be the prefix SentencePiece added.
  if (state->at_start && DropsSpacePrefix() && !IsSpecialTokenType(t) && out->size() > start && (*out)[start] == ' ') {
    out->erase(start, 1);
  }
  state->at_start = false;
  return absl::OkStatus();
}

absl::StatusOr<std::string> VocabTokenizer::Decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  std::string text;
  DecodeState state;
  for (TokenId id : ids) RETURN_IF_ERROR(AppendDecoded(id, options, &state, &text));
  return text;
}

absl::StatusOr<std::string> VocabTokenizer::TokenToPiece(TokenId id) const {
  RETURN_IF_ERROR(CheckId(id));
  std::string piece;
  AppendPiece(id, &piece);
  return piece;
}

}  // namespace kvfleet::model
