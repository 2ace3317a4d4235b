#include "model/tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace kvfleet::model {
namespace {

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

void RegexSplitter::CodeDeleter::operator()(void* code) const { pcre2_code_free(static_cast<pcre2_code*>(code)); }

absl::StatusOr<RegexSplitter> RegexSplitter::Create(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    return absl::InternalError(absl::StrCat("pre-tokenizer pattern does not compile at offset ", offset, ": ",
                                            Pcre2Message(error), " (pattern: ", std::string(pattern), ")"));
  }
  // JIT is an optimisation only: when it is missing or fails, pcre2_match
  // interprets the same pattern with the same results.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return RegexSplitter(std::string(pattern), code);
}

absl::Status RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  auto* code = static_cast<pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(pcre2_match_data_create_from_pattern(code, nullptr));
  if (match == nullptr) return absl::ResourceExhaustedError("out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;   // where the next search starts
  size_t done = 0;  // end of the last piece emitted
  while (pos < text.size()) {
    // The caller validated the text once; checking it again on every call
    // would make splitting quadratic.
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pre-tokenizer regex failed at byte ", pos, " of ", text.size(), ": ", Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end == start) {
      // An empty match splits nothing; step over one character so the
      // search moves on.
      ++pos;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > done) pieces->push_back(text.substr(done, start - done));
    pieces->push_back(text.substr(start, end - start));
    done = pos = end;
  }
  if (done < text.size()) pieces->push_back(text.substr(done));
  return absl::OkStatus();
}

}  // namespace kvfleet::model
