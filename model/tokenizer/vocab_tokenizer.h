// The part of a Tokenizer that does not depend on the BPE flavour: the
// vocabulary and its text -> id index, special-token splitting, BOS/EOS,
// id validation, decoding token by token, and the stop tokens. The two BPE
// implementations derive from it and supply how a plain-text fragment is
// encoded and how one token is shown as bytes.
//
// Thread-safety: immutable after Init; all methods are const.
//
//   class MyBpe : public VocabTokenizer { ... EncodeFragment / AppendPiece ... };
//   RETURN_IF_ERROR(tok->Init());
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/text_map.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::model {

class VocabTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text, const EncodeOptions& options) const final;
  absl::StatusOr<std::string> Decode(std::span<const TokenId> ids, const DecodeOptions& options) const final;
  absl::Status AppendDecoded(TokenId id, const DecodeOptions& options, DecodeState* state,
                             std::string* out) const final;
  absl::StatusOr<std::string> TokenToPiece(TokenId id) const final;
  std::optional<TokenId> FindToken(std::string_view text) const final;

  int32_t vocab_size() const final { return vocab_.size(); }
  std::optional<TokenId> bos() const final { return vocab_.bos; }
  std::optional<TokenId> eos() const final { return vocab_.eos; }
  std::optional<TokenId> eot() const final { return vocab_.eot; }
  bool IsControl(TokenId id) const final;
  std::span<const TokenId> StopTokens() const final { return stop_tokens_; }

 protected:
  explicit VocabTokenizer(Vocabulary vocab);

  // Validates the vocabulary and builds the shared indexes; call once,
  // before use, from the factory.
  absl::Status InitBase();

  // Appends the ids of `text`, a fragment that holds no special token.
  // `after_special` is true at the start of the input and right after a
  // special token (SentencePiece adds its space prefix there).
  virtual absl::Status EncodeFragment(std::string_view text, bool after_special, std::vector<TokenId>* out) const = 0;
  // Appends the bytes of the valid token `id`.
  virtual void AppendPiece(TokenId id, std::string* out) const = 0;
  // Whether decoding drops one leading space from the first decoded token
  // (SentencePiece with add_space_prefix).
  virtual bool DropsSpacePrefix() const { return false; }

  const Vocabulary& vocab() const { return vocab_; }
  TokenType type(TokenId id) const { return vocab_.token_types[id]; }
  absl::Status CheckId(TokenId id) const;

 private:
  Vocabulary vocab_;
  TextMap<TokenId> by_text_;
  std::unique_ptr<SpecialTokenMatcher> specials_;      // holds views into vocab_
  std::unique_ptr<SpecialTokenMatcher> user_defined_;  // matched even when specials are not parsed
  std::vector<TokenId> stop_tokens_;
};

}  // namespace kvfleet::model
