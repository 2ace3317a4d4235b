// SuffixProposer: drafts from the request's own text (the longest recurring
// suffix, the majority continuation among its occurrences) and from earlier
// outputs (the store), bounded by the match length and the estimated
// probability; never drafts less than prompt lookup would where prompt
// lookup drafts.
#include "engine/spec/suffix_proposer.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/spec/ngram_proposer.h"

namespace kvfleet::engine::spec {
namespace {

using Tokens = std::vector<model::TokenId>;

const BlockHash kTenant = RootBlockHash("model", "");

Tokens Propose(const SuffixProposer& p, const Tokens& context, int32_t k, const BlockHash& tenant = kTenant) {
  Tokens draft = {99, 99};  // must be replaced, not appended to
  p.ProposeFor(tenant, context, k, &draft);
  return draft;
}

TEST(SuffixProposerTest, ProposesWhatFollowedTheLongestRecurringSuffix) {
  SuffixProposer p({.max_spec_factor = 8, .store_bytes = 0});
  EXPECT_EQ(Propose(p, {6, 7, 8, 9, 10, 11, 6, 7, 8}, 3), (Tokens{9, 10, 11}));
  // {3, 4, 5} followed by 7 beats the more recent {4, 5} followed by 8.
  EXPECT_EQ(Propose(p, {3, 4, 5, 7, 0, 4, 5, 8, 0, 3, 4, 5}, 1), (Tokens{7}));
  // What exists after the occurrence, running into the suffix itself.
  EXPECT_EQ(Propose(p, {1, 2, 5, 1, 2}, 8), (Tokens{5, 1, 2}));
  // Too short a match, or none: nothing.
  EXPECT_EQ(Propose(p, {1, 2, 3, 4, 1}, 4), Tokens{});
  EXPECT_EQ(Propose(p, {1, 2, 3}, 4), Tokens{});
  EXPECT_EQ(Propose(p, {6, 7, 8, 9, 6, 7, 8}, 0), Tokens{});
}

TEST(SuffixProposerTest, TheMajorityOfOccurrencesDecidesAndItsShareBoundsTheDraft) {
  // {1, 2} was followed by 5 twice and by 6 once (the most recent).
  const Tokens context = {1, 2, 5, 9, 1, 2, 5, 8, 1, 2, 6, 7, 1, 2};
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 8, .store_bytes = 0}), context, 1), (Tokens{5}));
  // The draft goes on while the running share stays above the minimum:
  // 5 (2/3), then 9 or 8 (1/2 of those: 1/3 in all).
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 8, .min_token_prob = 0.5, .store_bytes = 0}), context, 4),
            (Tokens{5}));
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 8, .min_token_prob = 0.3, .store_bytes = 0}), context, 2).size(),
            2u);
}

TEST(SuffixProposerTest, TheDraftIsAtMostFactorTimesTheMatch) {
  const Tokens context = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2};
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 1, .store_bytes = 0}), context, 8), (Tokens{3, 4}));
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 2, .store_bytes = 0}), context, 8), (Tokens{3, 4, 5, 6}));
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 1.5, .store_bytes = 0}), context, 8), (Tokens{3, 4, 5}));
}

TEST(SuffixProposerTest, EarlierOutputsProposeWhatFollowedThem) {
  SuffixProposer p({.max_spec_factor = 4});
  p.Learn(kTenant, Tokens{40, 41, 42, 43, 44, 45});
  p.Learn(kTenant, Tokens{40, 41, 42, 43, 50});
  ASSERT_NE(p.store(), nullptr);
  EXPECT_EQ(p.store()->num_sequences(), 2);
  // A new request whose text ends in {41, 42}: 43 (both), then 44 or 50
  // (half each: at the minimum probability 0.1 both would pass; the lower
  // token wins the tie).
  EXPECT_EQ(Propose(p, {7, 41, 42}, 3), (Tokens{43, 44, 45}));
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 4, .min_token_prob = 0.6}), {7, 41, 42}, 3), Tokens{});
  SuffixProposer strict({.max_spec_factor = 4, .min_token_prob = 0.6});
  strict.Learn(kTenant, Tokens{40, 41, 42, 43, 44, 45});
  strict.Learn(kTenant, Tokens{40, 41, 42, 43, 50});
  EXPECT_EQ(Propose(strict, {7, 41, 42}, 3), (Tokens{43}));
}

TEST(SuffixProposerTest, TheSourceWithTheMoreLikelyDraftWins) {
  SuffixProposer p({.max_spec_factor = 4});
  p.Learn(kTenant, Tokens{1, 2, 3, 4, 5, 6, 7});
  // Own text: {1, 2} followed by 9 once (4 tokens, sure). The store: {1, 2}
  // followed by 3 4 5 6 (4 tokens, sure too): a tie goes to the own text.
  EXPECT_EQ(Propose(p, {1, 2, 9, 9, 9, 9, 1, 2}, 4), (Tokens{9, 9, 9, 9}));
  // Own text can only offer 2 tokens here; the store offers 4.
  EXPECT_EQ(Propose(p, {1, 2, 9, 1, 2}, 4), (Tokens{3, 4, 5, 6}));
  // With no store, the own text's.
  EXPECT_EQ(Propose(SuffixProposer({.max_spec_factor = 4, .store_bytes = 0}), {1, 2, 9, 1, 2}, 4), (Tokens{9, 1, 2}));
}

// One tenant's outputs never draft for another (their acceptance, and so
// their latency, would tell one what the other wrote); each tenant's own
// outputs still do, and tenants share the store's bound.
TEST(SuffixProposerTest, ATenantsDraftsComeOnlyFromItsOwnOutputs) {
  const BlockHash a = RootBlockHash("model", "tenant-a");
  const BlockHash b = RootBlockHash("model", "tenant-b");
  SuffixProposer p({.max_spec_factor = 4});
  p.Learn(a, Tokens{40, 41, 42, 43, 44, 45});
  EXPECT_EQ(Propose(p, {7, 41, 42}, 3, a), (Tokens{43, 44, 45}));
  EXPECT_EQ(Propose(p, {7, 41, 42}, 3, b), Tokens{});
  // B's own output with the same start: B drafts its continuation, A still its own.
  p.Learn(b, Tokens{40, 41, 42, 60, 61, 62});
  EXPECT_EQ(Propose(p, {7, 41, 42}, 3, b), (Tokens{60, 61, 62}));
  EXPECT_EQ(Propose(p, {7, 41, 42}, 3, a), (Tokens{43, 44, 45}));
  ASSERT_NE(p.store(), nullptr);
  EXPECT_EQ(p.store()->num_tenants(), 2);
  ASSERT_TRUE(p.store()->Audit().ok()) << p.store()->Audit();
}

// Wherever prompt lookup drafts, the suffix proposer drafts too, from a
// match at least as long; with one occurrence and no length bound, the same
// tokens.
TEST(SuffixProposerTest, DraftsWhereverPromptLookupDoes) {
  std::mt19937 rng(5);
  NgramProposer ngram({.min_n = 2, .max_n = 4});
  SuffixProposer suffix({.max_spec_factor = 64, .min_token_prob = 0.0, .store_bytes = 0});
  int same = 0, compared = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Tokens context(2 + rng() % 40);
    for (auto& x : context) x = static_cast<model::TokenId>(rng() % (2 + trial % 9));
    const int32_t k = 1 + static_cast<int32_t>(rng() % 8);
    Tokens a, b;
    ngram.ProposeFor(context, k, &a);
    suffix.ProposeFor(kTenant, context, k, &b);
    if (!a.empty()) {
      EXPECT_FALSE(b.empty()) << "trial " << trial;
      ++compared;
      same += a == b;
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(same, compared / 4);  // agreement is common but not the rule: majorities differ from recency
}

TEST(SuffixProposerTest, OptionsOutsideTheirRangesAreRefused) {
  EXPECT_TRUE(SuffixProposerOptions{}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.max_depth = 1}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.min_match = 24}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.max_spec_factor = 0}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.min_token_prob = 1.0}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.store_bytes = -1}.Validate().ok());
  EXPECT_FALSE(SuffixProposerOptions{.store_bytes = 100}.Validate().ok());
  EXPECT_TRUE(SuffixProposerOptions{.store_bytes = 0}.Validate().ok());
}

}  // namespace
}  // namespace kvfleet::engine::spec
