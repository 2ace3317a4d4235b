// The tokenizers the fuzzers drive: byte-level BPE under each supported
// pre-tokenizer (a small vocabulary with merges; SmolLM2's real one when
// $KVFLEET_FUZZ_MODEL names its GGUF) and SentencePiece with byte fallback.
// Built once per process: fuzzers call them millions of times.
#pragma once

#include <memory>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace kvfleet::fuzz {

// At least one of each kind; index with an input byte modulo size().
const std::vector<std::unique_ptr<model::Tokenizer>>& FuzzTokenizers();

}  // namespace kvfleet::fuzz
