// Randomized invariant test of BlockPool. Simulated requests allocate blocks,
// share cached prefixes, grow, commit full blocks under chained hashes of
// token prefixes drawn from a small set (so sharing and duplicate commits
// happen), fork, finish, cancel and run the pool dry. After every operation
// the pool is compared with a brute-force model kept by the test:
//   - every block is counted once: used + cached + empty == total, and the
//     free blocks are exactly the blocks nobody holds, in LRU order;
//   - each block's reference count is the number of simulated holders;
//   - the hash → block map matches, and every hashed block's recorded
//     contents (the token prefix written into it) hash to that very hash;
//   - the listener's view (stored minus removed) is the set of hashed blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/block_hash.h"
#include "engine/kv/block_pool.h"
#include "tests/testing/recording_kv_listener.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::KvEvent;
using ::kvfleet::testing::RecordingKvListener;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 16;
constexpr size_t kMaxRequests = 8;
constexpr int32_t kMaxTokens = 40;
constexpr int kOpsPerSeed = 5000;

struct Request {
  int root = 0;
  std::vector<int32_t> tokens;    // the whole sequence the request will have
  std::vector<BlockHash> hashes;  // of its full blocks
  std::vector<BlockId> table;     // blocks it holds, in position order
  int32_t num_tokens = 0;         // tokens whose KV is in `table`
};

// What a block physically holds: the KV of the last positions of `prefix`
// under `root`. Full blocks hold the KV of prefix.size() tokens in all.
struct Contents {
  int root = -1;
  std::vector<int32_t> prefix;
};

struct Counters {
  int hits = 0;
  int evictions = 0;
  int exhaustions = 0;
  int commits = 0;
  int duplicate_commits = 0;
  int forks = 0;
  int clears = 0;
};

class PoolSimulation {
 public:
  explicit PoolSimulation(uint32_t seed)
      : pool_(kNumBlocks, &listener_),
        rng_(seed),
        holders_(kNumBlocks, 0),
        model_hash_(kNumBlocks),
        contents_(kNumBlocks) {
    roots_ = {RootBlockHash("model", ""), RootBlockHash("model", "tenant-b")};
    // Three 6-block prefixes; the second shares its first 3 blocks with the first.
    for (int p = 0; p < 3; ++p) {
      std::vector<int32_t> tokens(6 * kBlockSize);
      for (int32_t& t : tokens) t = 100 + static_cast<int32_t>(Rand(50));
      prefixes_.push_back(tokens);
    }
    std::copy_n(prefixes_[0].begin(), 3 * kBlockSize, prefixes_[1].begin());
    for (int32_t b = 0; b < kNumBlocks; ++b) free_lru_.push_back(b);
  }

  // One random operation; returns its name for failure messages.
  const char* Step() {
    const uint32_t r = Rand(100);
    if (requests_.empty() || (r < 20 && requests_.size() < kMaxRequests)) {
      Start();
      return "start";
    }
    const size_t i = Rand(static_cast<uint32_t>(requests_.size()));
    if (r < 77 && r >= 65) {
      ReleaseAll(i, /*reverse=*/true);
      return "finish";
    }
    if (r < 85 && r >= 77) {
      ReleaseAll(i, /*reverse=*/false);
      return "cancel";
    }
    if (r < 92 && r >= 85) {
      Fork(i);
      return "fork";
    }
    if (r < 94 && r >= 92) {
      DrainAndMaybeClear();
      return "drain";
    }
    Grow(i);
    return "grow";
  }

  void Check();
  const Counters& counters() const { return counters_; }

 private:
  uint32_t Rand(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  // Random tail tokens from a two-letter vocabulary, so tails collide too.
  void AppendRandomTail(std::vector<int32_t>& tokens, size_t length) {
    while (tokens.size() < length) tokens.push_back(static_cast<int32_t>(Rand(2)));
  }

  Request NewRequest(int root, std::vector<int32_t> tokens) {
    Request req;
    req.root = root;
    req.hashes = HashFullBlocks(roots_[static_cast<size_t>(root)], tokens, kBlockSize);
    req.tokens = std::move(tokens);
    return req;
  }

  void Start();
  void Grow(size_t i);
  void Fork(size_t i);
  void ReleaseAll(size_t i, bool reverse);
  void DrainAndMaybeClear();

  std::optional<BlockId> Allocate();
  void CommitLastFullBlock(Request& req);
  void Hold(BlockId b);
  void Drop(BlockId b);
  BlockHash HashOf(const Contents& c);

  RecordingKvListener listener_;
  BlockPool pool_;
  std::mt19937 rng_;
  std::vector<BlockHash> roots_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::vector<Request> requests_;
  // The model of the pool.
  std::vector<int32_t> holders_;
  std::list<int32_t> free_lru_;
  std::map<BlockHash, int32_t> cache_;
  std::vector<std::optional<BlockHash>> model_hash_;
  std::vector<Contents> contents_;
  std::map<std::pair<int, std::vector<int32_t>>, BlockHash> hash_memo_;
  Counters counters_;
};

void PoolSimulation::Hold(BlockId b) {
  const auto i = static_cast<size_t>(b.value());
  if (holders_[i]++ == 0) {
    const auto it = std::find(free_lru_.begin(), free_lru_.end(), b.value());
    ASSERT_NE(it, free_lru_.end()) << "block " << b << " unheld but not free";
    free_lru_.erase(it);
  }
}

void PoolSimulation::Drop(BlockId b) {
  const auto i = static_cast<size_t>(b.value());
  ASSERT_GT(holders_[i], 0);
  if (--holders_[i] == 0) free_lru_.push_back(b.value());
}

void PoolSimulation::Start() {
  const int root = static_cast<int>(Rand(2));
  const std::vector<int32_t>& prefix = prefixes_[Rand(3)];
  const size_t length = 1 + Rand(kMaxTokens);
  std::vector<int32_t> tokens(prefix.begin(), prefix.begin() + static_cast<ptrdiff_t>(std::min(length, prefix.size())));
  AppendRandomTail(tokens, length);
  Request req = NewRequest(root, std::move(tokens));
  // The longest cached prefix, block by block, as the scheduler would take it.
  for (size_t k = 0; k < req.hashes.size(); ++k) {
    const BlockHash& h = req.hashes[k];
    const bool expected_hit = cache_.contains(h);
    ASSERT_EQ(pool_.IsCached(h), expected_hit) << "block " << k;
    if (!expected_hit) {
      const BlockPoolStats before = pool_.Stats();
      const size_t events = listener_.events().size();
      ASSERT_EQ(pool_.AcquireCached(h), std::nullopt);
      const BlockPoolStats after = pool_.Stats();
      ASSERT_TRUE(before.used == after.used && before.cached == after.cached && before.empty == after.empty);
      ASSERT_EQ(listener_.events().size(), events);
      break;
    }
    const std::optional<BlockId> b = pool_.AcquireCached(h);
    ASSERT_EQ(b, BlockId(cache_[h]));
    // The property prefix caching exists for: the hit block holds exactly the
    // KV of this request's tokens up to the end of that block.
    const Contents& c = contents_[static_cast<size_t>(b->value())];
    const size_t end = (k + 1) * kBlockSize;
    ASSERT_EQ(c.root, req.root);
    ASSERT_EQ(c.prefix, std::vector<int32_t>(req.tokens.begin(), req.tokens.begin() + static_cast<ptrdiff_t>(end)));
    Hold(*b);
    req.table.push_back(*b);
    req.num_tokens = static_cast<int32_t>(end);
    ++counters_.hits;
  }
  requests_.push_back(std::move(req));
}

std::optional<BlockId> PoolSimulation::Allocate() {
  const std::optional<int32_t> expected = free_lru_.empty() ? std::nullopt : std::optional<int32_t>(free_lru_.front());
  const size_t events = listener_.events().size();
  const std::optional<BlockId> b = pool_.Allocate();
  EXPECT_EQ(b.has_value(), expected.has_value());
  if (!b.has_value() || !expected.has_value()) return std::nullopt;
  EXPECT_EQ(b->value(), *expected) << "not the least recently released block";
  const auto i = static_cast<size_t>(b->value());
  if (model_hash_[i].has_value()) {
    EXPECT_EQ(listener_.events().size(), events + 1);
    EXPECT_EQ(listener_.events().back(), KvEvent::Removed(*model_hash_[i]));
    cache_.erase(*model_hash_[i]);
    model_hash_[i].reset();
    ++counters_.evictions;
  } else {
    EXPECT_EQ(listener_.events().size(), events);
  }
  Hold(*b);
  contents_[i] = Contents{};  // about to be overwritten
  return b;
}

void PoolSimulation::Grow(size_t i) {
  Request& req = requests_[i];
  const auto remaining = static_cast<int32_t>(req.tokens.size()) - req.num_tokens;
  if (remaining == 0) return ReleaseAll(i, /*reverse=*/true);
  const int32_t count = std::min<int32_t>(remaining, 1 + static_cast<int32_t>(Rand(2 * kBlockSize)));
  for (int32_t n = 0; n < count; ++n) {
    if (req.num_tokens % kBlockSize == 0) {
      const std::optional<BlockId> b = Allocate();
      if (!b.has_value()) {
        // Out of blocks: the scheduler preempts this request.
        ++counters_.exhaustions;
        EXPECT_EQ(pool_.num_free(), 0);
        return ReleaseAll(i, /*reverse=*/true);
      }
      req.table.push_back(*b);
    }
    ++req.num_tokens;
    // Only the request's own last block is ever written: hits and forks share
    // full blocks only.
    const BlockId last = req.table.back();
    ASSERT_EQ(pool_.ref_count(last), 1);
    Contents& c = contents_[static_cast<size_t>(last.value())];
    c.root = req.root;
    c.prefix.assign(req.tokens.begin(), req.tokens.begin() + req.num_tokens);
    if (req.num_tokens % kBlockSize == 0) CommitLastFullBlock(req);
  }
}

void PoolSimulation::CommitLastFullBlock(Request& req) {
  const size_t k = static_cast<size_t>(req.num_tokens / kBlockSize) - 1;
  const BlockId b = req.table[k];
  const BlockHash& h = req.hashes[k];
  const std::optional<BlockHash> parent = k == 0 ? std::nullopt : std::optional<BlockHash>(req.hashes[k - 1]);
  const size_t events = listener_.events().size();
  pool_.Commit(b, h, parent);
  ++counters_.commits;
  if (cache_.contains(h)) {
    ++counters_.duplicate_commits;
    EXPECT_EQ(pool_.hash_of(b), std::nullopt);
    EXPECT_EQ(listener_.events().size(), events);
    return;
  }
  cache_[h] = b.value();
  model_hash_[static_cast<size_t>(b.value())] = h;
  EXPECT_EQ(listener_.events().size(), events + 1);
  EXPECT_EQ(listener_.events().back(), KvEvent::Stored(h, parent));
}

void PoolSimulation::Fork(size_t i) {
  if (requests_.size() >= kMaxRequests) return;
  const Request& parent = requests_[i];
  const size_t full = static_cast<size_t>(parent.num_tokens / kBlockSize);
  std::vector<int32_t> tokens(parent.tokens.begin(), parent.tokens.begin() + static_cast<ptrdiff_t>(full * kBlockSize));
  AppendRandomTail(tokens, tokens.size() + Rand(3 * kBlockSize));
  Request child = NewRequest(parent.root, std::move(tokens));
  for (size_t k = 0; k < full; ++k) {
    const BlockId b = parent.table[k];
    pool_.Retain(b);
    Hold(b);
    child.table.push_back(b);
  }
  child.num_tokens = static_cast<int32_t>(full * kBlockSize);
  ++counters_.forks;
  requests_.push_back(std::move(child));
}

void PoolSimulation::ReleaseAll(size_t i, bool reverse) {
  std::vector<BlockId> table = std::move(requests_[i].table);
  requests_.erase(requests_.begin() + static_cast<ptrdiff_t>(i));
  if (reverse) std::reverse(table.begin(), table.end());
  for (BlockId b : table) {
    pool_.Release(b);
    Drop(b);
  }
}

void PoolSimulation::DrainAndMaybeClear() {
  while (!requests_.empty()) ReleaseAll(requests_.size() - 1, /*reverse=*/true);
  Check();
  if (Rand(2) == 0) return;
  pool_.Clear();
  EXPECT_EQ(listener_.events().back(), KvEvent::Cleared());
  cache_.clear();
  for (auto& h : model_hash_) h.reset();
  ++counters_.clears;
}

BlockHash PoolSimulation::HashOf(const Contents& c) {
  auto [it, inserted] = hash_memo_.try_emplace({c.root, c.prefix});
  if (inserted) it->second = HashFullBlocks(roots_[static_cast<size_t>(c.root)], c.prefix, kBlockSize).back();
  return it->second;
}

void PoolSimulation::Check() {
  // Reference counts against a recount of every simulated holder.
  std::vector<int32_t> recount(kNumBlocks, 0);
  for (const Request& req : requests_) {
    for (BlockId b : req.table) ++recount[static_cast<size_t>(b.value())];
  }
  ASSERT_EQ(recount, holders_);
  BlockPoolStats expected{.total = kNumBlocks};
  for (int32_t b = 0; b < kNumBlocks; ++b) {
    const auto i = static_cast<size_t>(b);
    ASSERT_EQ(pool_.ref_count(BlockId(b)), recount[i]) << "block " << b;
    const std::optional<BlockHash> h = pool_.hash_of(BlockId(b));
    ASSERT_EQ(h, model_hash_[i]) << "block " << b;
    if (recount[i] > 0) {
      ++expected.used;
    } else if (h.has_value()) {
      ++expected.cached;
    } else {
      ++expected.empty;
    }
    if (!h.has_value()) continue;
    ASSERT_TRUE(pool_.IsCached(*h));
    ASSERT_EQ(cache_.at(*h), b);
    // The block's contents are exactly the prefix its hash was computed from.
    const Contents& c = contents_[i];
    ASSERT_TRUE(!c.prefix.empty() && c.prefix.size() % kBlockSize == 0) << "block " << b;
    ASSERT_EQ(HashOf(c), *h) << "block " << b << " holds other tokens than its hash says";
  }
  // Every block counted once: used + cached + empty == total.
  const BlockPoolStats s = pool_.Stats();
  ASSERT_EQ(s.total, kNumBlocks);
  ASSERT_EQ(s.used + s.cached + s.empty, s.total);
  ASSERT_EQ(s.used, expected.used);
  ASSERT_EQ(s.cached, expected.cached);
  ASSERT_EQ(s.empty, expected.empty);
  ASSERT_EQ(pool_.num_free(), s.free());
  // The model's free list holds each unheld block exactly once.
  ASSERT_EQ(static_cast<int32_t>(free_lru_.size()), s.free());
  absl::flat_hash_set<int32_t> free_set(free_lru_.begin(), free_lru_.end());
  ASSERT_EQ(free_set.size(), free_lru_.size());
  for (int32_t b : free_lru_) ASSERT_EQ(recount[static_cast<size_t>(b)], 0);
  // The listener's view is the set of hashed (cached or in-use) blocks.
  ASSERT_EQ(listener_.live().size(), cache_.size());
  for (const auto& [h, b] : cache_) ASSERT_TRUE(listener_.live().contains(h)) << h.ToHex();
  ASSERT_TRUE(listener_.errors().empty()) << listener_.errors().front();
}

TEST(BlockPoolRandomTest, InvariantsHoldAfterEveryOperation) {
  Counters total;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    PoolSimulation sim(seed);
    for (int op = 0; op < kOpsPerSeed; ++op) {
      const char* name = sim.Step();
      if (!::testing::Test::HasFailure()) sim.Check();
      if (::testing::Test::HasFailure()) {
        FAIL() << "seed " << seed << ", operation " << op << " (" << name << ")";
      }
    }
    // The run exercised what it claims to.
    const Counters& c = sim.counters();
    EXPECT_GT(c.hits, 0) << "seed " << seed;
    EXPECT_GT(c.evictions, 0) << "seed " << seed;
    EXPECT_GT(c.exhaustions, 0) << "seed " << seed;
    EXPECT_GT(c.duplicate_commits, 0) << "seed " << seed;
    EXPECT_GT(c.forks, 0) << "seed " << seed;
    total.clears += c.clears;
    RecordProperty("seed_" + std::to_string(seed),
                   "hits=" + std::to_string(c.hits) + " evictions=" + std::to_string(c.evictions) +
                       " exhaustions=" + std::to_string(c.exhaustions) + " commits=" + std::to_string(c.commits) +
                       " duplicates=" + std::to_string(c.duplicate_commits) + " forks=" + std::to_string(c.forks) +
                       " clears=" + std::to_string(c.clears));
  }
  EXPECT_GT(total.clears, 0);
}

}  // namespace
}  // namespace kvfleet::engine
