// Randomized test of PrefixIndex against a brute-force model: per worker a
// std::set of held hashes, overlaps counted naively worker by worker. Each
// seed drives a few thousand random events — Store of chain runs (sometimes
// starting mid-chain, sometimes repeating, with their parent named, or
// sometimes not), Remove of held and unheld hashes
// and of chain tails (LRU eviction), Clear, ReplaceAll snapshots, and worker
// death with the slot reused by a new worker; stores land in a random tier
// (device, host, disk: a held block stored again in another is a move) —
// over prompts drawn from a
// small tree of shared prefixes, hashed with the real chained block hash.
// After every event: BlockCount of every slot, EntryCount, DistinctHashes and
// CheckInvariants agree with the model, and many FindOverlaps queries (whole
// prompts, prefixes, prompts extended past anything stored) give exactly the
// model's answer; queries that are not chains (shuffled hashes, one prompt's
// prefix then another prompt) name exactly the workers holding their first
// hash. A second mode keeps every worker's chains whole (stores from a
// chain's start or a held prefix, evictions of leaves only, tier moves in
// any order), so every query takes FindOverlaps' bisection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/block_hash.h"
#include "services/cachemanager/index/prefix_index.h"

namespace kvfleet::cachemanager {
namespace {

constexpr int64_t kBlockSize = 4;

struct Config {
  uint32_t seed;
  std::vector<int32_t> slots;  // the worker slots in play
  int steps;
  bool whole_chains = false;  // only events that keep every worker's chains whole
};

// Prompts as token sequences, each either fresh or a block-aligned prefix of
// an earlier one plus new blocks, so many share leading blocks.
std::vector<std::vector<BlockHash>> MakePrompts(std::mt19937& rng, int count) {
  const BlockHash root = RootBlockHash("random-test-model", "");
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<BlockHash>> prompts;
  for (int p = 0; p < count; ++p) {
    std::vector<int32_t> seq;
    if (!tokens.empty() && rng() % 4 != 0) {
      const std::vector<int32_t>& parent = tokens[rng() % tokens.size()];
      const size_t parent_blocks = parent.size() / kBlockSize;
      seq.assign(parent.begin(), parent.begin() + (rng() % (parent_blocks + 1)) * kBlockSize);
    }
    const int extra_blocks = 1 + static_cast<int>(rng() % 6);
    // A small token alphabet: distinct prompts can still reach equal blocks
    // at different depths, which the chained hash keeps apart.
    for (int64_t t = 0; t < extra_blocks * kBlockSize; ++t) seq.push_back(static_cast<int32_t>(rng() % 5));
    prompts.push_back(HashFullBlocks(root, seq, kBlockSize));
    tokens.push_back(std::move(seq));
  }
  return prompts;
}

class Harness {
 public:
  explicit Harness(const Config& config)
      : config_(config),
        rng_(config.seed),
        prompts_(MakePrompts(rng_, 40)),
        model_(config.slots.size()),
        lower_(config.slots.size()) {
    for (const auto& p : prompts_) {
      universe_.insert(universe_.end(), p.begin(), p.end());
      for (size_t i = 1; i < p.size(); ++i) parent_of_[p[i]] = p[i - 1];
    }
  }

  void Run() {
    for (int step = 0; step < config_.steps; ++step) {
      SCOPED_TRACE("seed " + std::to_string(config_.seed) + " step " + std::to_string(step));
      const std::string what = Step();
      SCOPED_TRACE("after " + what);
      CheckCounts();
      for (int q = 0; q < 6; ++q) {
        const auto [query, chain] = RandomQuery();
        CheckQuery(query, chain);
      }
      if (HasFailure()) return;
    }
  }

 private:
  static bool HasFailure() { return ::testing::Test::HasFailure(); }

  KvTier RandomTier() {
    const uint32_t roll = rng_() % 10;
    return roll < 6 ? KvTier::kDevice : roll < 8 ? KvTier::kHost : KvTier::kDisk;
  }

  // Stores `run` in both, in `tier`.
  void StoreRun(size_t w, const std::vector<BlockHash>& run, KvTier tier, ChainParent parent) {
    int64_t added = 0;
    for (const BlockHash& h : run) {
      added += model_[w].insert(h).second ? 1 : 0;
      if (tier == KvTier::kDevice) {
        lower_[w].erase(h);
      } else {
        lower_[w][h] = tier;
      }
    }
    EXPECT_EQ(index_.Store(WorkerSlot(config_.slots[w]), run, tier, parent), added);
  }

  // Events that keep every chain whole: a worker holding a block holds its
  // parent, as a worker's LRU (children leave first) keeps it.
  std::string WholeChainStep(size_t w) {
    const int kind = static_cast<int>(rng_() % 100);
    const std::vector<BlockHash>& p = prompts_[rng_() % prompts_.size()];
    if (kind < 55) {  // the held prefix continued, or moved to a tier
      size_t held = 0;
      while (held < p.size() && model_[w].contains(p[held])) ++held;
      const size_t begin = held == p.size() || rng_() % 2 == 0 ? 0 : held;
      const size_t end = begin + 1 + rng_() % (p.size() - begin);
      StoreRun(w, std::vector<BlockHash>(p.begin() + begin, p.begin() + end), RandomTier(),
               begin == 0 ? ChainParent::Root() : ChainParent::Of(p[begin - 1]));
      return "store whole";
    }
    if (kind < 95) {  // evict a few leaves
      for (int k = 1 + static_cast<int>(rng_() % 6); k > 0; --k) {
        std::set<BlockHash> parents;
        for (const BlockHash& h : model_[w]) {
          if (const auto it = parent_of_.find(h); it != parent_of_.end()) parents.insert(it->second);
        }
        std::vector<BlockHash> leaves;
        for (const BlockHash& h : model_[w]) {
          if (!parents.contains(h)) leaves.push_back(h);
        }
        if (leaves.empty()) break;
        const BlockHash leaf = leaves[rng_() % leaves.size()];
        model_[w].erase(leaf);
        lower_[w].erase(leaf);
        EXPECT_EQ(index_.Remove(WorkerSlot(config_.slots[w]), std::vector<BlockHash>{leaf}), 1);
      }
      return "evict leaves";
    }
    EXPECT_EQ(index_.Clear(WorkerSlot(config_.slots[w])), static_cast<int64_t>(model_[w].size()));
    model_[w].clear();
    lower_[w].clear();
    return "clear";
  }

  // One random event, applied to both the index and the model.
  std::string Step() {
    const size_t w = rng_() % model_.size();
    if (config_.whole_chains) return WholeChainStep(w);
    const WorkerSlot slot(config_.slots[w]);
    const int kind = static_cast<int>(rng_() % 100);
    if (kind < 40) {  // a run of a prompt's chain, usually from its start
      const std::vector<BlockHash>& p = prompts_[rng_() % prompts_.size()];
      const size_t begin = rng_() % 3 == 0 ? rng_() % p.size() : 0;
      const size_t end = begin + 1 + rng_() % (p.size() - begin);
      std::vector<BlockHash> run(p.begin() + begin, p.begin() + end);
      if (rng_() % 8 == 0) run.push_back(run.front());  // a repeat within the event (held by then: no parent)
      ChainParent parent = begin == 0 ? ChainParent::Root() : ChainParent::Of(p[begin - 1]);
      if (rng_() % 6 == 0) parent = ChainParent{};  // not said
      StoreRun(w, run, RandomTier(), parent);
      return "store";
    }
    if (kind < 60) {  // arbitrary hashes, held or not
      std::vector<BlockHash> hashes = Sample(model_[w], 1 + rng_() % 6);
      for (int k = static_cast<int>(rng_() % 3); k > 0; --k) hashes.push_back(universe_[rng_() % universe_.size()]);
      int64_t removed = 0;
      for (const BlockHash& h : hashes) {
        removed += static_cast<int64_t>(model_[w].erase(h));
        lower_[w].erase(h);
      }
      EXPECT_EQ(index_.Remove(slot, hashes), removed);
      return "remove";
    }
    if (kind < 75) {  // LRU-style eviction: the tail of a prompt's chain
      const std::vector<BlockHash>& p = prompts_[rng_() % prompts_.size()];
      std::vector<BlockHash> tail(p.begin() + rng_() % p.size(), p.end());
      std::reverse(tail.begin(), tail.end());
      int64_t removed = 0;
      for (const BlockHash& h : tail) {
        removed += static_cast<int64_t>(model_[w].erase(h));
        lower_[w].erase(h);
      }
      EXPECT_EQ(index_.Remove(slot, tail), removed);
      return "evict tail";
    }
    if (kind < 82) {
      EXPECT_EQ(index_.Clear(slot), static_cast<int64_t>(model_[w].size()));
      model_[w].clear();
      lower_[w].clear();
      return "clear";
    }
    if (kind < 92) {  // snapshot: some of what it had, some new, repeats
      std::vector<BlockHash> snapshot = Sample(model_[w], rng_() % (model_[w].size() + 1));
      for (int k = static_cast<int>(rng_() % 12); k > 0; --k) snapshot.push_back(universe_[rng_() % universe_.size()]);
      if (!snapshot.empty() && rng_() % 2 == 0) snapshot.push_back(snapshot[rng_() % snapshot.size()]);
      std::shuffle(snapshot.begin(), snapshot.end(), rng_);
      index_.ReplaceAll(slot, snapshot, SnapshotParents(snapshot));
      model_[w] = std::set<BlockHash>(snapshot.begin(), snapshot.end());
      lower_[w].clear();  // a snapshot lists the device
      return "snapshot";
    }
    // The worker dies; its slot goes to a new worker, which starts with a
    // snapshot of a few prompts (what the server does on Register).
    index_.Clear(slot);
    model_[w].clear();
    lower_[w].clear();
    std::vector<BlockHash> snapshot;
    for (int k = static_cast<int>(rng_() % 3); k > 0; --k) {
      const std::vector<BlockHash>& p = prompts_[rng_() % prompts_.size()];
      snapshot.insert(snapshot.end(), p.begin(), p.end());
    }
    index_.ReplaceAll(slot, snapshot, SnapshotParents(snapshot));
    model_[w].insert(snapshot.begin(), snapshot.end());
    return "death and reuse";
  }

  // Half the time each hash's true parent, as workers send them; otherwise
  // none (a worker that does not say).
  std::vector<ChainParent> SnapshotParents(const std::vector<BlockHash>& snapshot) {
    std::vector<ChainParent> parents;
    if (rng_() % 2 == 0) return parents;
    for (const BlockHash& h : snapshot) {
      const auto it = parent_of_.find(h);
      parents.push_back(it == parent_of_.end() ? ChainParent::Root() : ChainParent::Of(it->second));
    }
    return parents;
  }

  std::vector<BlockHash> Sample(const std::set<BlockHash>& from, size_t n) {
    std::vector<BlockHash> all(from.begin(), from.end());
    std::shuffle(all.begin(), all.end(), rng_);
    all.resize(std::min(n, all.size()));
    return all;
  }

  // A query, and whether it is a chain.
  std::pair<std::vector<BlockHash>, bool> RandomQuery() {
    const std::vector<BlockHash>& p = prompts_[rng_() % prompts_.size()];
    std::vector<BlockHash> q;
    const uint32_t kind = rng_() % 5;
    switch (kind) {
      case 0:
        q = p;
        break;
      case 1:
        q.assign(p.begin(), p.begin() + rng_() % (p.size() + 1));  // may be empty
        break;
      case 2: {  // the prompt continued past anything any worker stored
        q = p;
        std::vector<int32_t> more(kBlockSize * 3, 7);
        const std::vector<BlockHash> tail = HashFullBlocks(p.back(), more, kBlockSize);
        q.insert(q.end(), tail.begin(), tail.end());
        break;
      }
      case 3:  // not a chain at all: gaps and repeats anywhere
        for (int k = 1 + static_cast<int>(rng_() % 10); k > 0; --k) q.push_back(universe_[rng_() % universe_.size()]);
        break;
      default:  // a block-aligned mix: one prompt's prefix, then another's blocks
        q.assign(p.begin(), p.begin() + 1 + rng_() % p.size());
        const std::vector<BlockHash>& other = prompts_[rng_() % prompts_.size()];
        q.insert(q.end(), other.begin(), other.end());
        break;
    }
    return {q, kind <= 2};
  }

  std::vector<Overlap> NaiveOverlaps(const std::vector<BlockHash>& q) const {
    std::vector<Overlap> out;
    for (size_t w = 0; w < model_.size(); ++w) {
      int32_t n = 0;
      while (static_cast<size_t>(n) < q.size() && model_[w].count(q[n]) > 0) ++n;
      if (n == 0) continue;
      Overlap o{WorkerSlot(config_.slots[w]), n};
      for (int32_t b = 0; b < n; ++b) {
        const auto it = lower_[w].find(q[b]);
        if (it != lower_[w].end()) ++(it->second == KvTier::kHost ? o.host_blocks : o.disk_blocks);
      }
      out.push_back(o);
    }
    std::sort(out.begin(), out.end(), [](const Overlap& a, const Overlap& b) { return a.worker < b.worker; });
    return out;
  }

  void CheckQuery(const std::vector<BlockHash>& q, bool chain) {
    const std::vector<Overlap> found = index_.FindOverlaps(q);
    const std::vector<Overlap> naive = NaiveOverlaps(q);
    if (chain) {
      ASSERT_EQ(found, naive);
      return;
    }
    // Not a chain: outside FindOverlaps' contract, but it still names the
    // holders of q[0] and counts nothing impossible.
    ASSERT_EQ(found.size(), naive.size());
    for (size_t i = 0; i < found.size(); ++i) {
      ASSERT_EQ(found[i].worker, naive[i].worker);
      ASSERT_GE(found[i].matched_blocks, 1);
      ASSERT_LE(found[i].matched_blocks, static_cast<int32_t>(q.size()));
      ASSERT_LE(found[i].host_blocks + found[i].disk_blocks, found[i].matched_blocks);
    }
  }

  void CheckCounts() {
    std::set<BlockHash> distinct;
    int64_t entries = 0;
    for (size_t w = 0; w < model_.size(); ++w) {
      ASSERT_EQ(index_.BlockCount(WorkerSlot(config_.slots[w])), static_cast<int64_t>(model_[w].size()))
          << "slot " << w;
      for (KvTier tier : {KvTier::kHost, KvTier::kDisk}) {
        int64_t n = 0;
        for (const auto& [h, t] : lower_[w]) n += t == tier ? 1 : 0;
        ASSERT_EQ(index_.LowerBlockCount(WorkerSlot(config_.slots[w]), tier), n) << "slot " << w;
      }
      distinct.insert(model_[w].begin(), model_[w].end());
      entries += static_cast<int64_t>(model_[w].size());
    }
    ASSERT_EQ(index_.EntryCount(), entries);
    ASSERT_EQ(index_.DistinctHashes(), static_cast<int64_t>(distinct.size()));
    const absl::Status invariants = index_.CheckInvariants();
    ASSERT_TRUE(invariants.ok()) << invariants;
  }

  Config config_;
  std::mt19937 rng_;
  std::vector<std::vector<BlockHash>> prompts_;
  std::vector<BlockHash> universe_;         // every hash of every prompt
  std::vector<std::set<BlockHash>> model_;  // by position in config_.slots
  std::vector<std::map<BlockHash, KvTier>> lower_;  // of model_[w], what is held only below the device
  std::map<BlockHash, BlockHash> parent_of_;        // of every prompt hash past a chain's first
  PrefixIndex index_;
};

std::vector<int32_t> DenseSlots(int32_t n) {
  std::vector<int32_t> slots;
  for (int32_t s = 0; s < n; ++s) slots.push_back(s);
  return slots;
}

TEST(PrefixIndexRandomTest, EightWorkers) {
  for (uint32_t seed : {1u, 2u, 3u}) Harness({seed, DenseSlots(8), 3000}).Run();
}

// Slots far apart, unused slots in between.
TEST(PrefixIndexRandomTest, SparseSlots) { Harness({11, {0, 1, 5, 63, 64, 65, 130, 200}, 2000}).Run(); }

// Enough workers that a block can have far more holders than workers still
// matching, so FindOverlaps takes its binary-search path too.
TEST(PrefixIndexRandomTest, ManyWorkers) { Harness({21, DenseSlots(24), 2000}).Run(); }

// Every worker's chains stay whole, so every query bisects.
TEST(PrefixIndexRandomTest, WholeChainsBisect) {
  for (uint32_t seed : {31u, 32u, 33u}) Harness({seed, DenseSlots(8), 3000, /*whole_chains=*/true}).Run();
}

}  // namespace
}  // namespace kvfleet::cachemanager
