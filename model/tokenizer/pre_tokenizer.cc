#include "model/tokenizer/pre_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace kvfleet::model {
namespace {

// \s and \S are spelled out as the Unicode White_Space set, which is what
// Oniguruma (Hugging Face tokenizers) and Python's regex match. PCRE2's UCP
// \s differs from it (it also matches U+180E), and which code points it
// covers has moved between PCRE2 releases.
constexpr std::string_view kSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string WithExplicitSpace(std::string_view pattern) {
  const std::string space(kSpace);
  return absl::StrReplaceAll(std::string(pattern),
                             {{R"([^\s)", "[^" + space}, {R"(\s)", "[" + space + "]"}, {R"(\S)", "[^" + space + "]"}});
}

// GPT-2's pattern, as in encoder.py and in the ByteLevel pre-tokenizer.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's pattern, from its tokenizer.json.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's pattern (its tokenizer.json, and llama.cpp's "qwen2"): Llama 3's
// with every digit on its own.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Digits(individual_digits=True): every numeric character (Unicode N*, as
// Rust's char::is_numeric) on its own.
constexpr std::string_view kEachDigitPattern = R"(\p{N})";

}  // namespace

std::string_view PreTokenizer::SupportedNames() { return "smollm, llama-bpe, qwen2, dbrx, default, gpt2"; }

absl::StatusOr<std::vector<std::string>> PreTokenizer::NamedPatterns(std::string_view name, bool* ignore_merges) {
  *ignore_merges = false;
  if (name == "smollm") return std::vector<std::string>{std::string(kEachDigitPattern), std::string(kGpt2Pattern)};
  if (name == "llama-bpe") {
    *ignore_merges = true;
    return std::vector<std::string>{std::string(kLlama3Pattern)};
  }
  if (name == "qwen2") return std::vector<std::string>{std::string(kQwen2Pattern)};
  // cl100k's pattern, Llama 3's, with every merge applied (OLMo 2, DBRX).
  if (name == "dbrx") return std::vector<std::string>{std::string(kLlama3Pattern)};
  if (name == "default" || name == "gpt2") return std::vector<std::string>{std::string(kGpt2Pattern)};
  return absl::UnimplementedError(
      absl::StrCat("byte-level BPE pre-tokenizer '", std::string(name),
                   "' (tokenizer.ggml.pre) is not supported; supported: ", std::string(SupportedNames())));
}

absl::StatusOr<PreTokenizer> PreTokenizer::Create(std::string_view name) {
  bool ignore_merges = false;
  ASSIGN_OR_RETURN(std::vector<std::string> patterns, NamedPatterns(name, &ignore_merges));
  ASSIGN_OR_RETURN(PreTokenizer pre, FromPatterns(patterns, ignore_merges));
  pre.name_ = std::string(name);
  return pre;
}

absl::StatusOr<PreTokenizer> PreTokenizer::FromPatterns(const std::vector<std::string>& patterns, bool ignore_merges) {
  std::vector<RegexSplitter> stages;
  for (const std::string& pattern : patterns) {
    absl::StatusOr<RegexSplitter> stage = RegexSplitter::Create(WithExplicitSpace(pattern));
    if (!stage.ok()) {
      return absl::Status(stage.status().code(), absl::StrCat("tokenizer.json pre-tokenizer pattern ", pattern, ": ",
                                                              stage.status().message()));
    }
    stages.push_back(std::move(*stage));
  }
  return PreTokenizer("tokenizer.json", std::move(stages), ignore_merges);
}

std::string_view PreTokenizer::Gpt2Pattern() { return kGpt2Pattern; }
std::string_view PreTokenizer::EachDigitPattern() { return kEachDigitPattern; }

absl::Status PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  std::vector<std::string_view> current = {text};
  std::vector<std::string_view> next;
  for (const RegexSplitter& stage : stages_) {
    next.clear();
    for (std::string_view piece : current) RETURN_IF_ERROR(stage.Split(piece, &next));
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
  return absl::OkStatus();
}

}  // namespace kvfleet::model
