#include "tests/fuzz/fuzz_tokenizers.h"

#include <cstdlib>

#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_vocabulary.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/testing/vocabularies.h"

namespace kvfleet::fuzz {
namespace {

std::unique_ptr<model::Tokenizer> MustCreate(const model::Vocabulary& v) {
  absl::StatusOr<std::unique_ptr<model::Tokenizer>> t = model::CreateTokenizer(v);
  Check(t.ok(), "the fuzzers' own vocabulary: " + std::string(t.status().message()));
  return std::move(*t);
}

std::vector<std::unique_ptr<model::Tokenizer>> Build() {
  std::vector<std::unique_ptr<model::Tokenizer>> out;
  const std::vector<std::string> merges = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "Ġ Ġ", "1 2", "ĊĊ Ċ"};
  for (const char* pre : {"gpt2", "smollm", "llama-bpe"}) {
    out.push_back(MustCreate(testing::ByteLevelVocabulary(merges, pre)));
  }
  out.push_back(MustCreate(testing::SentencePieceVocabulary(
      {{"▁", -1}, {"▁t", -2}, {"he", -3}, {"▁the", -1.5f}, {"in", -4}, {"▁a", -2}, {"日本", -3}})));
  if (const char* path = std::getenv("KVFLEET_FUZZ_MODEL"); path != nullptr) {
    absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(path);
    Check(file.ok(), "KVFLEET_FUZZ_MODEL: " + std::string(file.status().message()));
    absl::StatusOr<model::Vocabulary> vocab = model::ReadGgufVocabulary(**file);
    Check(vocab.ok(), "KVFLEET_FUZZ_MODEL's vocabulary: " + std::string(vocab.status().message()));
    out.push_back(MustCreate(*vocab));
  }
  return out;
}

}  // namespace

const std::vector<std::unique_ptr<model::Tokenizer>>& FuzzTokenizers() {
  static const auto* tokenizers = new std::vector<std::unique_ptr<model::Tokenizer>>(Build());
  return *tokenizers;
}

}  // namespace kvfleet::fuzz
