// The tokenizer interface of kvfleet and its factory.
//
// A Tokenizer turns prompt text into token ids and ids back into bytes, for
// the vocabulary of one model. Two implementations sit behind it:
// byte-level BPE (Vocabulary::model "gpt2": GPT-2, Llama 3, SmolLM2, Qwen)
// and SentencePiece-style BPE ("llama": Llama 2, Mistral). They reproduce
// Hugging Face tokenizers / llama.cpp exactly; tests/reference checks it.
//
// Thread-safety: a Tokenizer is immutable after creation; every method may
// be called from many threads at once.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, CreateTokenizer(vocab));
//   ASSIGN_OR_RETURN(std::vector<TokenId> ids, tok->Encode(prompt, {.parse_special = true}));
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/token_id.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

struct EncodeOptions {
  // Add BOS / EOS as the vocabulary asks (Vocabulary::add_bos, add_eos).
  bool add_special = false;
  // Map the texts of control tokens ("<|im_start|>") in the text to their
  // ids. Off, they are tokenized as the characters they are: text from an
  // end user must not be able to forge a turn boundary. User-defined tokens
  // (Gemma's "\n\n", Qwen's "<tool_call>") are whole tokens either way, as
  // in Hugging Face and llama.cpp: they are ordinary text, split out first.
  bool parse_special = false;
};

struct DecodeOptions {
  // Leave control and unknown tokens (BOS, <|im_end|>, ...) out of the text.
  bool skip_special = false;
};

// What decoding a token depends on from the tokens before it. Decode starts
// from a fresh state; IncrementalDetokenizer keeps one across Push calls.
struct DecodeState {
  // No token has been decoded yet (skipped tokens do not count):
  // SentencePiece drops the space it added in front of the text here.
  bool at_start = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // INVALID_ARGUMENT when `text` is not valid UTF-8 (with the byte offset).
  virtual absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text,
                                                      const EncodeOptions& options = {}) const = 0;

  // The bytes of the text; not necessarily valid UTF-8 (a sequence may end
  // in the middle of a character). INVALID_ARGUMENT for an id outside
  // [0, vocab_size).
  virtual absl::StatusOr<std::string> Decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const = 0;

  // Appends what token `id` adds to a decoded text, given `state`, and
  // updates `state`. Decode(ids) is exactly this over ids from a fresh state.
  virtual absl::Status AppendDecoded(TokenId id, const DecodeOptions& options, DecodeState* state,
                                     std::string* out) const = 0;

  // The raw bytes token `id` stands for: " the" for "Ġthe" or "▁the", one
  // byte for "<0x0A>", the text itself for control tokens.
  virtual absl::StatusOr<std::string> TokenToPiece(TokenId id) const = 0;

  // The id of the token whose vocabulary text is `text` (as stored: "Ġthe").
  virtual std::optional<TokenId> FindToken(std::string_view text) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual std::optional<TokenId> bos() const = 0;
  virtual std::optional<TokenId> eos() const = 0;
  virtual std::optional<TokenId> eot() const = 0;
  // False for ids out of range.
  virtual bool IsControl(TokenId id) const = 0;
  // The tokens that end generation: EOS, EOT and the end-of-turn control
  // tokens the vocabulary has (<|im_end|>, <|eot_id|>, <|end_of_text|>, ...).
  // Sorted, no duplicates.
  virtual std::span<const TokenId> StopTokens() const = 0;
};

// INVALID_ARGUMENT for an inconsistent vocabulary (array lengths, ids out of
// range, a merge that is not "left right"); UNIMPLEMENTED for a model or
// pre-tokenizer kvfleet does not have, naming the supported ones.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(const Vocabulary& vocab);

}  // namespace kvfleet::model
