// A Vocabulary written as Hugging Face's tokenizer.json and
// tokenizer_config.json, as the model's own checkpoint would carry them:
// byte-level BPE with its Split pre-tokenizer regexes (Qwen, Llama 3,
// SmolLM2), or SentencePiece-style BPE with spaces as "▁" and byte fallback
// (Gemma, Llama 2), whose merges are synthesized from the piece scores the
// way transformers' SentencePiece converter does it. Control tokens become
// special added tokens, user-defined ones non-special added tokens.
//
//   ASSIGN_OR_RETURN(nlohmann::ordered_json tok, TokenizerJson(vocab));
#pragma once

#include "absl/status/statusor.h"
#include "model/vocabulary.h"
#include "nlohmann/json.hpp"

namespace kvfleet::tools {

absl::StatusOr<nlohmann::ordered_json> TokenizerJson(const model::Vocabulary& vocab);
nlohmann::ordered_json TokenizerConfigJson(const model::Vocabulary& vocab, int64_t context_length);

}  // namespace kvfleet::tools
