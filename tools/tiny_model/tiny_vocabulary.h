// The tiny models' vocabulary: GPT-2 byte-level BPE with three ChatML
// control tokens, all 256 byte tokens and a few dozen English merges — small
// enough for fast tests, complete enough that any text encodes.
#pragma once

#include <string>
#include <vector>

#include "model/gguf/gguf_writer.h"

namespace kvfleet::tools {

struct TinyVocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;
};

TinyVocabulary MakeTinyVocabulary();

// Writes tokenizer.ggml.* and tokenizer.chat_template (ChatML).
void AddTinyVocabulary(const TinyVocabulary& vocab, model::GgufWriter& writer);

}  // namespace kvfleet::tools
