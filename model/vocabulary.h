// The tokenizer's inputs as stored in a model file: tokens, their types and
// scores, BPE merges, special token ids and the chat template. Tokenizers
// are built from a Vocabulary; the GGUF reader fills one from metadata
// (tokenizer.ggml.*), the Hugging Face reader from tokenizer.json and
// tokenizer_config.json (model/hf/hf_vocabulary.h).
//
//   ASSIGN_OR_RETURN(Vocabulary vocab, ReadGgufVocabulary(gguf));
//   ASSIGN_OR_RETURN(auto tok, CreateTokenizer(vocab));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/token_id.h"

namespace kvfleet::model {

// llama.cpp's token type numbering, as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocabulary {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
  std::string pre;    // tokenizer.ggml.pre: "smollm", "llama-bpe", "default", ... (gpt2 model only)
  // tokenizer.json's pre-tokenizer as its split patterns (regexes applied in
  // order, matches and gaps both kept), used instead of `pre` when set.
  std::vector<std::string> pre_patterns;
  bool ignore_merges = false;  // with pre_patterns: tokenizer.json's model.ignore_merges
  std::vector<std::string> tokens;
  std::vector<float> scores;            // empty when the file has none
  std::vector<TokenType> token_types;   // same length as tokens
  std::vector<std::string> merges;      // "left right", highest priority first
  std::optional<TokenId> bos, eos, unk, pad, eot;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  std::string chat_template;            // Jinja source; empty when the file has none

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace kvfleet::model
