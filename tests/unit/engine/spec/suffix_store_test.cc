// SuffixStore: counts every substring up to its depth, finds a context's
// longest stored suffix with a continuation, forgets the oldest text to
// stay within its bound, and its allocated bytes stay within the bound it
// promises. Random sequences are checked against a recount (Audit) and
// against a brute-force longest match.
#include "engine/spec/suffix_store.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

namespace kvfleet::engine::spec {
namespace {

using Tokens = std::vector<model::TokenId>;

const BlockHash kTenant = RootBlockHash("model", "");

std::map<model::TokenId, int64_t> Children(const SuffixStore& store, int32_t node) {
  std::map<model::TokenId, int64_t> out;
  store.ForEachChild(node, [&](model::TokenId t, int64_t c) { out[t] = c; });
  return out;
}

TEST(SuffixStoreTest, CountsWhatFollowedEachSubstring) {
  SuffixStore store({.max_depth = 4, .max_nodes = 1000});
  store.Add(kTenant, Tokens{1, 2, 3, 1, 2, 4});
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  const SuffixStore::Match m = store.LongestSuffix(kTenant, Tokens{9, 9, 1, 2}, 8);
  ASSERT_GE(m.node, 0);
  EXPECT_EQ(m.length, 2);
  EXPECT_EQ(store.Count(m.node), 2);
  EXPECT_EQ(Children(store, m.node), (std::map<model::TokenId, int64_t>{{3, 1}, {4, 1}}));
  // {3, 1, 2} occurs once and went on to 4.
  const SuffixStore::Match longer = store.LongestSuffix(kTenant, Tokens{3, 1, 2}, 8);
  EXPECT_EQ(longer.length, 3);
  EXPECT_EQ(Children(store, longer.node), (std::map<model::TokenId, int64_t>{{4, 1}}));
}

TEST(SuffixStoreTest, AMatchThatEndsTheTextFallsBackToOneThatGoesOn) {
  SuffixStore store({.max_depth = 8, .max_nodes = 1000});
  store.Add(kTenant, Tokens{5, 6, 7});
  // {6, 7} occurs but ends the text; {7} does too; nothing goes on.
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{6, 7}, 8).node, -1);
  // {5, 6} goes on to 7.
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{1, 5, 6}, 8).length, 2);
  // The length asked for bounds the match.
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{1, 5, 6}, 1).length, 1);
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{}, 8).node, -1);
}

// The longest suffix of `context` (at most max_length, below depth) that
// occurs in one of `texts` with a token after it, by brute force.
int32_t BruteLongest(const std::vector<Tokens>& texts, const Tokens& context, int32_t max_length, int32_t depth) {
  int32_t best = 0;
  const auto len = static_cast<int32_t>(context.size());
  for (int32_t m = 1; m <= std::min({max_length, depth - 1, len}); ++m) {
    for (const Tokens& t : texts) {
      for (size_t s = 0; s + m < t.size(); ++s) {
        if (std::equal(context.end() - m, context.end(), t.begin() + s)) best = m;
      }
    }
  }
  return best;
}

TEST(SuffixStoreTest, RandomTextsAgreeWithARecountAndABruteForceMatch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t depth = 2 + static_cast<int32_t>(rng() % 6);
    SuffixStore store({.max_depth = depth, .max_nodes = 10000});
    std::vector<Tokens> texts;
    for (int i = 0; i < 5; ++i) {
      Tokens t(1 + rng() % 30);
      for (auto& x : t) x = static_cast<model::TokenId>(rng() % 4);
      store.Add(kTenant, t);
      texts.push_back(t);
      ASSERT_TRUE(store.Audit().ok()) << store.Audit();
    }
    for (int q = 0; q < 20; ++q) {
      Tokens context(rng() % 12);
      for (auto& x : context) x = static_cast<model::TokenId>(rng() % 4);
      const int32_t max_length = 1 + static_cast<int32_t>(rng() % 10);
      const SuffixStore::Match m = store.LongestSuffix(kTenant, context, max_length);
      EXPECT_EQ(m.node < 0 ? 0 : m.length, BruteLongest(texts, context, max_length, depth));
    }
  }
}

TEST(SuffixStoreTest, StaysWithinItsBoundByForgettingTheOldestText) {
  std::mt19937 rng(11);
  const int64_t max_nodes = 500;
  SuffixStore store({.max_depth = 6, .max_nodes = max_nodes});
  Tokens newest;
  for (int i = 0; i < 200; ++i) {
    newest.assign(5 + rng() % 40, 0);
    for (auto& x : newest) x = static_cast<model::TokenId>(rng() % 50);
    store.Add(kTenant, newest);
    ASSERT_LE(store.num_nodes(), max_nodes);
    ASSERT_LE(store.num_tokens(), max_nodes);
    if (i % 20 == 0) {
      ASSERT_TRUE(store.Audit().ok()) << store.Audit();
    }
  }
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  EXPECT_LT(store.num_sequences(), 200);  // the old ones were forgotten
  // The newest text is always there whole.
  const SuffixStore::Match m = store.LongestSuffix(kTenant, Tokens(newest.begin(), newest.begin() + 3), 3);
  EXPECT_EQ(m.length, 3);
}

TEST(SuffixStoreTest, ATextLongerThanTheBoundKeepsWhatFits) {
  SuffixStore store({.max_depth = 4, .max_nodes = 40});
  Tokens text(100);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<model::TokenId>(i);  // nothing repeats
  store.Add(kTenant, text);
  EXPECT_LE(store.num_nodes(), 40);
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{0, 1}, 2).length, 2);
  // It filled the bound, so adding more forgets it.
  store.Add(kTenant, Tokens{7, 7, 7});
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  EXPECT_EQ(store.num_sequences(), 1);
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{0, 1}, 2).node, -1);
  EXPECT_EQ(store.LongestSuffix(kTenant, Tokens{7, 7}, 2).length, 2);
}

// A sequence cut short by the bound lacks the suffixes of its last
// substrings: every query about it still finds a node or nothing.
TEST(SuffixStoreTest, QueriesIntoACutSequenceFindANodeOrNothing) {
  SuffixStore store({.max_depth = 6, .max_nodes = 60});
  Tokens text(200);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<model::TokenId>(i % 97);
  store.Add(kTenant, text);
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  for (size_t end = 1; end <= text.size(); ++end) {
    const SuffixStore::Match m = store.LongestSuffix(kTenant, Tokens(text.begin(), text.begin() + end), 5);
    if (m.node >= 0) {
      EXPECT_GE(m.length, 1);
      EXPECT_EQ(store.Depth(m.node), m.length);
    }
  }
}

// Each tenant has its own trie under one shared bound: the same text under
// two tenants is counted twice and found only by its own; forgetting a
// tenant's last sequence frees its root.
TEST(SuffixStoreTest, TenantsKeepSeparateTriesUnderOneBound) {
  const BlockHash a = RootBlockHash("model", "a");
  const BlockHash b = RootBlockHash("model", "b");
  SuffixStore store({.max_depth = 4, .max_nodes = 40});
  store.Add(a, Tokens{1, 2, 3});
  EXPECT_EQ(store.LongestSuffix(a, Tokens{1, 2}, 4).length, 2);
  EXPECT_EQ(store.LongestSuffix(b, Tokens{1, 2}, 4).node, -1);
  store.Add(b, Tokens{1, 2, 4});
  ASSERT_TRUE(store.Audit().ok()) << store.Audit();
  EXPECT_EQ(store.num_tenants(), 2);
  EXPECT_EQ(Children(store, store.LongestSuffix(a, Tokens{1, 2}, 4).node), (std::map<model::TokenId, int64_t>{{3, 1}}));
  EXPECT_EQ(Children(store, store.LongestSuffix(b, Tokens{1, 2}, 4).node), (std::map<model::TokenId, int64_t>{{4, 1}}));
  // Two roots and six substrings each.
  EXPECT_EQ(store.num_nodes(), 2 + 2 * 6);
  // B's texts fill the bound: A's sequence, and its root, go.
  for (int i = 0; i < 10; ++i) {
    store.Add(b, Tokens{10 + i, 11 + i, 12 + i});
    ASSERT_TRUE(store.Audit().ok()) << store.Audit();
    ASSERT_LE(store.num_nodes(), 40);
  }
  EXPECT_EQ(store.num_tenants(), 1);
  EXPECT_EQ(store.LongestSuffix(a, Tokens{1, 2}, 4).node, -1);
}

TEST(SuffixStoreTest, AllocatedBytesStayWithinTheBoundPerNode) {
  std::mt19937 rng(3);
  for (int64_t max_nodes : {1000, 20000, 100000}) {
    SuffixStore store({.max_depth = 24, .max_nodes = max_nodes});
    for (int i = 0; i < 3 * max_nodes / 100; ++i) {
      Tokens t(64);
      for (auto& x : t) x = static_cast<model::TokenId>(rng() % 32000);
      // Many tenants: their roots must fit the bound too.
      store.Add(RootBlockHash("model", std::to_string(i % 97)), t);
      // A small fixed part (empty containers, the deque's chunks) on top.
      ASSERT_LE(store.AllocatedBytes(), max_nodes * SuffixStore::BytesPerNode() + (64 << 10))
          << "after " << i << " texts, " << store.num_nodes() << " nodes";
    }
    EXPECT_GT(store.num_nodes(), max_nodes / 2);
  }
}

}  // namespace
}  // namespace kvfleet::engine::spec
