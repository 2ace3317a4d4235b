// Reads a Vocabulary from GGUF metadata (tokenizer.ggml.*, tokenizer.chat_template).
//
//   ASSIGN_OR_RETURN(Vocabulary vocab, ReadGgufVocabulary(*gguf));
#pragma once

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

// Errors name the file and the key: missing tokens, arrays of mismatched
// lengths, an unsupported tokenizer model.
absl::StatusOr<Vocabulary> ReadGgufVocabulary(const GgufFile& file);

}  // namespace kvfleet::model
