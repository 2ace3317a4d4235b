// A Hugging Face checkpoint's tokenizer as a Vocabulary: tokenizer.json
// (the model, its pre-tokenizer and normalizer, the added tokens) with
// tokenizer_config.json (bos/eos tokens, add_bos_token, the chat template;
// or chat_template.jinja beside it).
//
// Read: a BPE model either byte-level (a ByteLevel pre-tokenizer, alone or
// after Split regexes or Digits: Qwen, Llama 3, SmolLM2, GPT-2) or
// SentencePiece-style (spaces replaced by "▁", byte fallback: Llama 2,
// Mistral, Gemma), whose merge ranks become piece scores. Added tokens
// keep their ids, special ones as control tokens and the others as
// user-defined. An NFC normalizer is accepted and not applied, as llama.cpp
// does: text already in NFC, which is nearly all text, tokenizes the same.
// Anything else (WordPiece, Unigram, another normalizer or pre-tokenizer)
// is refused naming the file, the field and what is supported.
//
//   ASSIGN_OR_RETURN(Vocabulary v, ReadHfVocabulary("ckpt/"));
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "model/vocabulary.h"
#include "nlohmann/json.hpp"

namespace kvfleet::model {

absl::StatusOr<Vocabulary> ReadHfVocabulary(const std::string& dir);

// The same from JSON already read (tests, fuzzers): `origin` names the files in errors.
absl::StatusOr<Vocabulary> VocabularyFromTokenizerJson(const nlohmann::json& tokenizer,
                                                        const nlohmann::json& tokenizer_config,
                                                        const std::string& origin);

}  // namespace kvfleet::model
