#include "engine/spec/ngram_proposer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::engine::spec {
namespace {

constexpr int32_t kMaxN = 64;

// Where to copy the draft from for the last `n` tokens of `context`: the
// start of the most recent earlier occurrence with `want` tokens after it,
// or, when every occurrence sits too close to the end, the earliest one (it
// has the most after it). -1 when the n-gram does not recur.
int64_t ChooseOccurrence(std::span<const model::TokenId> context, int32_t n, int32_t want) {
  const int64_t len = static_cast<int64_t>(context.size());
  if (len <= n) return -1;
  const std::span<const model::TokenId> suffix = context.subspan(len - n);
  int64_t earliest = -1;
  // Candidates end at or before len - 2, so at least one token follows them;
  // scanning backwards, the tokens after a candidate only grow.
  for (int64_t start = len - n - 1; start >= 0; --start) {
    if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
    if (len - start - n >= want) return start;
    earliest = start;
  }
  return earliest;
}

}  // namespace

absl::Status NgramProposerOptions::Validate() const {
  if (min_n < 1 || min_n > max_n || max_n > kMaxN) {
    return absl::InvalidArgumentError(absl::StrCat("ngram proposer: need 1 <= min_n <= max_n <= ", kMaxN,
                                                   ", got min_n ", min_n, " and max_n ", max_n));
  }
  return absl::OkStatus();
}

NgramProposer::NgramProposer(NgramProposerOptions options) : options_(options) {
  const absl::Status valid = options_.Validate();
  CHECK(valid.ok()) << valid;
}

absl::Status NgramProposer::Propose(std::span<DraftSlot> slots) {
  for (DraftSlot& slot : slots) slot.evidence = ProposeFor(slot.context, slot.max_tokens, &slot.draft);
  return absl::OkStatus();
}

int32_t NgramProposer::ProposeFor(std::span<const model::TokenId> context, int32_t max_tokens,
                                  std::vector<model::TokenId>* draft) const {
  draft->clear();
  if (max_tokens <= 0) return 0;
  for (int32_t n = options_.max_n; n >= options_.min_n; --n) {
    const int64_t start = ChooseOccurrence(context, n, max_tokens);
    if (start < 0) continue;
    const int64_t from = start + n;
    const int64_t to = std::min<int64_t>(from + max_tokens, static_cast<int64_t>(context.size()));
    draft->assign(context.begin() + from, context.begin() + to);
    return n;
  }
  return 0;
}

}  // namespace kvfleet::engine::spec
