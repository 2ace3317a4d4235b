// NgramProposer: what follows the most recent earlier occurrence of the
// longest matching suffix n-gram, bounded by max_tokens and by what exists;
// nothing when no n-gram of the allowed sizes recurs. Checked against a
// brute-force restatement of the rule on random sequences too.
#include "engine/spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <random>

namespace kvfleet::engine::spec {
namespace {

using Tokens = std::vector<model::TokenId>;

Tokens Propose(NgramProposer& p, const Tokens& context, int32_t k) {
  Tokens draft = {99, 99};  // must be replaced, not appended to
  p.ProposeFor(context, k, &draft);
  return draft;
}

TEST(NgramProposerTest, ProposesWhatFollowedTheEarlierOccurrence) {
  NgramProposer p({.min_n = 2, .max_n = 3});
  //                  the n-gram {7, 8} occurs at 1; {6, 7, 8} too
  EXPECT_EQ(Propose(p, {6, 7, 8, 9, 10, 11, 6, 7, 8}, 3), (Tokens{9, 10, 11}));
  EXPECT_EQ(Propose(p, {6, 7, 8, 9, 10, 11, 6, 7, 8}, 2), (Tokens{9, 10}));
  // Only what exists after the occurrence (it may run into the suffix itself).
  EXPECT_EQ(Propose(p, {1, 2, 5, 1, 2}, 8), (Tokens{5, 1, 2}));
}

TEST(NgramProposerTest, TheLongestMatchWinsThenTheMostRecent) {
  NgramProposer p({.min_n = 1, .max_n = 3});
  // {4, 5} is followed by 1 at the start and by 2 later: the later one wins.
  EXPECT_EQ(Propose(p, {4, 5, 1, 0, 4, 5, 2, 0, 4, 5}, 1), (Tokens{2}));
  // {3, 4, 5} (n = 3) beats the more recent {4, 5} (n = 2).
  EXPECT_EQ(Propose(p, {3, 4, 5, 7, 0, 4, 5, 8, 0, 3, 4, 5}, 1), (Tokens{7}));
}

TEST(NgramProposerTest, NoRecurringNgramMeansNoDraft) {
  NgramProposer p({.min_n = 2, .max_n = 4});
  EXPECT_TRUE(Propose(p, {1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(Propose(p, {1, 2, 3, 1}, 4).empty());  // only a 1-gram recurs, below min_n
  EXPECT_TRUE(Propose(p, {}, 4).empty());
  EXPECT_TRUE(Propose(p, {1, 2, 1, 2}, 0).empty());
}

TEST(NgramProposerTest, RunsAndShortLoopsStillGiveAFullDraft) {
  NgramProposer p({.min_n = 2, .max_n = 4});
  // The most recent occurrence of 5555 has one 5 after it; the earliest, two.
  EXPECT_EQ(Propose(p, {5, 5, 5, 5, 5, 5}, 3), (Tokens{5, 5}));
  EXPECT_EQ(Propose(p, {9, 5, 5, 5, 5, 5, 5, 5}, 3), (Tokens{5, 5, 5}));
  EXPECT_EQ(Propose(p, {1, 2, 1, 2, 1, 2, 1, 2}, 4), (Tokens{1, 2, 1, 2}));
  // A more recent occurrence with enough after it beats an older one.
  EXPECT_EQ(Propose(p, {1, 2, 3, 0, 1, 2, 4, 4, 4, 0, 1, 2}, 2), (Tokens{4, 4}));
}

TEST(NgramProposerTest, OptionsAreValidated) {
  EXPECT_TRUE((NgramProposerOptions{.min_n = 1, .max_n = 1}).Validate().ok());
  EXPECT_FALSE((NgramProposerOptions{.min_n = 0, .max_n = 3}).Validate().ok());
  EXPECT_FALSE((NgramProposerOptions{.min_n = 4, .max_n = 3}).Validate().ok());
  EXPECT_FALSE((NgramProposerOptions{.min_n = 1, .max_n = 65}).Validate().ok());
  EXPECT_EQ(NgramProposer({}).name(), "ngram");
}

// The rule restated as directly as possible: collect every earlier
// occurrence of the longest recurring suffix n-gram, then pick.
Tokens BruteForce(const Tokens& c, int32_t min_n, int32_t max_n, int32_t k) {
  if (k <= 0) return {};
  const int64_t len = static_cast<int64_t>(c.size());
  for (int32_t n = max_n; n >= min_n; --n) {
    std::vector<int64_t> starts;  // ascending
    for (int64_t s = 0; s + n < len; ++s) {
      bool same = true;
      for (int32_t j = 0; j < n; ++j) same = same && c[s + j] == c[len - n + j];
      if (same) starts.push_back(s);
    }
    if (starts.empty()) continue;
    int64_t pick = starts.front();  // the earliest, unless a later one has k tokens after it
    for (int64_t s : starts) {
      if (len - s - n >= k) pick = s;
    }
    Tokens out;
    for (int64_t i = pick + n; i < len && static_cast<int32_t>(out.size()) < k; ++i) out.push_back(c[i]);
    return out;
  }
  return {};
}

TEST(NgramProposerTest, MatchesABruteForceRestatementOnRandomSequences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 3);
    const int32_t k = static_cast<int32_t>(rng() % 6);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 5);  // small: matches are common
    Tokens c(rng() % 40);
    for (auto& t : c) t = static_cast<model::TokenId>(rng() % vocab);
    NgramProposer p({.min_n = min_n, .max_n = max_n});
    ASSERT_EQ(Propose(p, c, k), BruteForce(c, min_n, max_n, k)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kvfleet::engine::spec
