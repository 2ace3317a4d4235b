#include "model/tokenizer/same_tokenizer.h"

#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kvfleet::model {
namespace {

std::string Quoted(const std::string& text) { return absl::StrCat("\"", absl::CHexEscape(text), "\""); }

std::string Id(const std::optional<TokenId>& id) { return id ? absl::StrCat(*id) : std::string("none"); }

}  // namespace

absl::Status SameTokenizer(const Vocabulary& first, const Vocabulary& second) {
  if (first.pre_patterns != second.pre_patterns && first.model == second.model && first.pre == second.pre) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizers split text differently: ", first.pre_patterns.size(),
                                                   " and ", second.pre_patterns.size(),
                                                   " pre-tokenizer patterns, not the same"));
  }
  if (first.model != second.model || first.pre != second.pre) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizers differ in kind: ", Quoted(first.model), "/",
                                                   Quoted(first.pre), " in the first and ", Quoted(second.model), "/",
                                                   Quoted(second.pre), " in the second"));
  }
  if (first.tokens.size() != second.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the vocabularies have ", first.tokens.size(), " and ", second.tokens.size(), " tokens"));
  }
  for (size_t i = 0; i < first.tokens.size(); ++i) {
    if (first.tokens[i] != second.tokens[i]) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " is ", Quoted(first.tokens[i]), " in the first and ",
                                                     Quoted(second.tokens[i]), " in the second"));
    }
  }
  if (first.merges != second.merges) {
    size_t i = 0;
    while (i < first.merges.size() && i < second.merges.size() && first.merges[i] == second.merges[i]) ++i;
    const auto at = [i](const std::vector<std::string>& merges) {
      return i < merges.size() ? Quoted(merges[i]) : std::string("none (the list ends)");
    };
    return absl::InvalidArgumentError(absl::StrCat(
        "the merge lists (", first.merges.size(), " and ", second.merges.size(), " merges) differ at rank ", i, ": ",
        at(first.merges), " in the first and ", at(second.merges), " in the second"));
  }
  const struct {
    const char* name;
    const std::optional<TokenId>& a;
    const std::optional<TokenId>& b;
  } specials[] = {{"bos", first.bos, second.bos},
                  {"eos", first.eos, second.eos},
                  {"eot", first.eot, second.eot},
                  {"unk", first.unk, second.unk},
                  {"pad", first.pad, second.pad}};
  for (const auto& s : specials) {
    if (s.a != s.b) {
      return absl::InvalidArgumentError(
          absl::StrCat("the special token ", s.name, " is ", Id(s.a), " in the first and ", Id(s.b), " in the second"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::model
