#include "engine/spec/suffix_proposer.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::engine::spec {
namespace {

// Occurrences of the own-text match weighed per draft position: the most
// recent ones; a run of one repeated token would otherwise make every
// position a candidate.
constexpr size_t kMaxOccurrences = 64;
// The most of one finished output the store learns (its end).
constexpr size_t kMaxLearnedTokens = 4096;

}  // namespace

absl::Status SuffixProposerOptions::Validate() const {
  if (max_depth < 2 || max_depth > 64 || min_match < 1 || min_match >= max_depth || !(max_spec_factor > 0) ||
      !(min_token_prob >= 0 && min_token_prob < 1) || store_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "suffix proposer: need 2 <= depth <= 64, 1 <= min match < depth, factor > 0, 0 <= min probability < 1 "
        "and store bytes >= 0; got depth ",
        max_depth, ", min match ", min_match, ", factor ", max_spec_factor, ", min probability ", min_token_prob,
        ", store bytes ", store_bytes));
  }
  // The store needs a tenant's root and one substring.
  if (store_bytes > 0 && store_bytes / SuffixStore::BytesPerNode() < max_depth + 1) {
    return absl::InvalidArgumentError(absl::StrCat("suffix proposer: a store of ", store_bytes,
                                                   " bytes cannot hold one substring; give at least ",
                                                   (max_depth + 1) * SuffixStore::BytesPerNode(), " or 0 for none"));
  }
  return absl::OkStatus();
}

SuffixProposer::SuffixProposer(SuffixProposerOptions options) : options_(options) {
  const absl::Status valid = options_.Validate();
  CHECK(valid.ok()) << valid;
  if (options_.store_bytes > 0) {
    // Node ids are 32-bit.
    store_.emplace(SuffixStore::Options{
        .max_depth = options_.max_depth,
        .max_nodes = std::min<int64_t>(options_.store_bytes / SuffixStore::BytesPerNode(), INT32_MAX / 2)});
  }
}

absl::Status SuffixProposer::Propose(std::span<DraftSlot> slots) {
  for (DraftSlot& slot : slots) {
    Explained why;
    ProposeFor(slot.tenant, slot.context, slot.max_tokens, &slot.draft, &why);
    slot.evidence = why.match_length;
  }
  return absl::OkStatus();
}

void SuffixProposer::Learn(const BlockHash& tenant, std::span<const model::TokenId> output) {
  // Learning runs on the engine thread between steps: a very long output
  // keeps its last kMaxLearnedTokens, so adding it stays a few milliseconds.
  if (store_) store_->Add(tenant, output.last(std::min(output.size(), kMaxLearnedTokens)));
}

int32_t SuffixProposer::DraftCap(int32_t match_length, int32_t max_tokens) const {
  const double cap = std::ceil(options_.max_spec_factor * match_length);
  return static_cast<int32_t>(std::min<double>(max_tokens, std::max(1.0, cap)));
}

void SuffixProposer::ProposeFor(const BlockHash& tenant, std::span<const model::TokenId> context, int32_t max_tokens,
                                std::vector<model::TokenId>* draft, Explained* explained) const {
  draft->clear();
  if (explained != nullptr) *explained = {};
  if (max_tokens <= 0) return;
  Candidate own = FromOwnText(context, max_tokens);
  Candidate stored = FromStore(tenant, context, max_tokens);
  const bool from_store = stored.score > own.score;
  Candidate& best = from_store ? stored : own;
  if (explained != nullptr && !best.tokens.empty()) {
    *explained = {.match_length = best.match_length, .from_store = from_store, .probability = best.probability};
  }
  *draft = std::move(best.tokens);
}

SuffixProposer::Candidate SuffixProposer::FromOwnText(std::span<const model::TokenId> context,
                                                      int32_t max_tokens) const {
  const auto len = static_cast<int64_t>(context.size());
  if (len < 2) return {};
  const model::TokenId last = context[len - 1];
  // Every earlier end of the longest recurring suffix, most recent first.
  int32_t best = 0;
  std::vector<int64_t> ends;
  for (int64_t j = len - 2; j >= 0; --j) {
    if (context[j] != last) continue;
    int32_t length = 1;
    while (length < options_.max_depth && j - length >= 0 && context[j - length] == context[len - 1 - length]) {
      ++length;
    }
    if (length > best) {
      best = length;
      ends.clear();
    }
    if (length == best && ends.size() < kMaxOccurrences) ends.push_back(j);
  }
  if (best < options_.min_match) return {};

  const int32_t cap = DraftCap(best, max_tokens);
  Candidate out{.match_length = best};
  double probability = 1.0;
  std::vector<std::pair<model::TokenId, int32_t>> tally;  // next token, occurrences; in recency order
  for (int32_t t = 0; t < cap; ++t) {
    tally.clear();
    int32_t known = 0;  // occurrences with text at this position
    for (int64_t end : ends) {
      const int64_t at = end + 1 + t;
      if (at >= len) continue;
      ++known;
      const model::TokenId next = context[at];
      auto it = std::find_if(tally.begin(), tally.end(), [&](const auto& e) { return e.first == next; });
      if (it == tally.end()) {
        tally.emplace_back(next, 1);
      } else {
        ++it->second;
      }
    }
    if (known == 0) break;
    // The first maximum is the most recent occurrence's token.
    const auto top =
        std::max_element(tally.begin(), tally.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    probability *= static_cast<double>(top->second) / known;
    if (probability < options_.min_token_prob) break;
    out.tokens.push_back(top->first);
    out.probability.push_back(probability);
    out.score += probability;
    // Occurrences that disagree drop out; those out of text stay (unknown).
    std::erase_if(ends, [&](int64_t end) { return end + 1 + t < len && context[end + 1 + t] != top->first; });
  }
  return out;
}

SuffixProposer::Candidate SuffixProposer::FromStore(const BlockHash& tenant, std::span<const model::TokenId> context,
                                                    int32_t max_tokens) const {
  if (!store_) return {};
  // Leave the store's depth room for the draft after the match.
  const int32_t longest = std::max(options_.min_match, options_.max_depth - max_tokens);
  const SuffixStore::Match match = store_->LongestSuffix(tenant, context, longest);
  if (match.node < 0 || match.length < options_.min_match) return {};
  const int32_t cap = DraftCap(match.length, max_tokens);
  const double occurrences = static_cast<double>(store_->Count(match.node));
  Candidate out{.match_length = match.length};
  int32_t node = match.node;
  for (int32_t t = 0; t < cap; ++t) {
    model::TokenId next = -1;
    int64_t count = 0;
    store_->ForEachChild(node, [&](model::TokenId token, int64_t c) {
      if (c > count || (c == count && token < next)) {
        next = token;
        count = c;
      }
    });
    if (count == 0) break;
    // Of the match's occurrences, the share that went on this way.
    const double probability = static_cast<double>(count) / occurrences;
    if (probability < options_.min_token_prob) break;
    out.tokens.push_back(next);
    out.probability.push_back(probability);
    out.score += probability;
    node = store_->Child(node, next);
  }
  return out;
}

}  // namespace kvfleet::engine::spec
