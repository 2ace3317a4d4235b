// The pre-tokenizers of byte-level BPE vocabularies, chosen by the GGUF name
// in tokenizer.ggml.pre. A pre-tokenizer is a sequence of regex splits, each
// applied to every piece the previous one produced; BPE then runs inside each
// final piece, so no token ever crosses a piece boundary.
//
//   ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create("smollm"));
//   RETURN_IF_ERROR(pre.Split("It's 42", &pieces));  // "It", "'s", " ", "4", "2"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/regex_splitter.h"

namespace kvfleet::model {

class PreTokenizer {
 public:
  // UNIMPLEMENTED for a name outside SupportedNames().
  static absl::StatusOr<PreTokenizer> Create(std::string_view name);
  static std::string_view SupportedNames();  // "smollm, llama-bpe, qwen2, default, gpt2"
  // The split patterns (Hugging Face regex syntax) of a named pre-tokenizer,
  // and whether it looks a whole piece up before merging.
  static absl::StatusOr<std::vector<std::string>> NamedPatterns(std::string_view name, bool* ignore_merges);
  // A tokenizer.json's own split patterns (Hugging Face regex syntax), in order.
  static absl::StatusOr<PreTokenizer> FromPatterns(const std::vector<std::string>& patterns, bool ignore_merges);
  // The patterns of tokenizer.json pre-tokenizer parts: ByteLevel(use_regex), Digits.
  static std::string_view Gpt2Pattern();
  static std::string_view EachDigitPattern();

  // `text` must be valid UTF-8. Pieces are views into `text`, in order, and
  // cover it exactly.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  const std::string& name() const { return name_; }
  // Llama 3 looks a whole piece up in the vocabulary before merging
  // (tokenizer.json "ignore_merges": true); GPT-2 style vocabularies merge.
  bool ignore_merges() const { return ignore_merges_; }

 private:
  PreTokenizer(std::string name, std::vector<RegexSplitter> stages, bool ignore_merges)
      : name_(std::move(name)), stages_(std::move(stages)), ignore_merges_(ignore_merges) {}

  std::string name_;
  std::vector<RegexSplitter> stages_;
  bool ignore_merges_ = false;
};

}  // namespace kvfleet::model
