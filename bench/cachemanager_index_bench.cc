// cachemanager_index_bench: the cachemanager's PrefixIndex against a naive
// index measured in the same run, on a synthetic cluster (bench/README.md,
// "Cachemanager prefix index").
//
// The cluster: W workers holding N (worker, block) entries in all, built from
// conversations that start with one of a few shared system prompts (picked
// with Zipf popularity, so the popular ones sit on nearly every worker) and
// go on with their own blocks; some conversations sit on several workers.
// Hashes are the real chained SHA-256 block hashes of random tokens.
//
// The baseline keeps only a hash set per worker: ingestion touches one table
// per hash instead of two, and FindOverlaps walks every worker's set from
// the first hash until that worker misses.
//
// Measured: Store and Remove events ingested per second (and hashes per
// second), and FindOverlaps latency (p50 / p99 over many prompts of
// --query-blocks hashes) for prompts that mostly hit, prompts that share only
// a system prompt, and prompts nobody holds.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/block_hash.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "services/cachemanager/index/prefix_index.h"

namespace kvfleet::bench {
namespace {

using cachemanager::ChainParent;
using cachemanager::Overlap;
using cachemanager::PrefixIndex;
using cachemanager::WorkerSlot;
using Chain = std::vector<BlockHash>;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: cachemanager_index_bench [--flag value ...]

PrefixIndex vs a naive per-worker-set index on a synthetic cluster.
  --workers 64          worker slots
  --entries 1000000     (worker, block) entries indexed in all
  --block-size 16       tokens per block (the hashes cover real tokens)
  --system-prompts 16   shared prefixes, Zipf popularity
  --query-blocks 512    hashes per FindOverlaps prompt (512 = 8k tokens)
  --queries 2000        prompts per kind (hit, system-prompt-only, cold)
  --events 50000        Store events per round (the same blocks are then removed)
  --rounds 5            ingest rounds
  --batch-max 32        hashes per event: uniform in [1, batch-max]
  --seed 1
)";

struct Options {
  int64_t workers, entries, block_size, system_prompts, query_blocks, queries, events, rounds, batch_max, seed;
};

absl::StatusOr<Options> ReadOptions(const flags::Flags& f) {
  Options o;
  ASSIGN_OR_RETURN(o.workers, f.GetInt("workers", 64));
  ASSIGN_OR_RETURN(o.entries, f.GetInt("entries", 1000000));
  ASSIGN_OR_RETURN(o.block_size, f.GetInt("block-size", 16));
  ASSIGN_OR_RETURN(o.system_prompts, f.GetInt("system-prompts", 16));
  ASSIGN_OR_RETURN(o.query_blocks, f.GetInt("query-blocks", 512));
  ASSIGN_OR_RETURN(o.queries, f.GetInt("queries", 2000));
  ASSIGN_OR_RETURN(o.events, f.GetInt("events", 50000));
  ASSIGN_OR_RETURN(o.rounds, f.GetInt("rounds", 5));
  ASSIGN_OR_RETURN(o.batch_max, f.GetInt("batch-max", 32));
  ASSIGN_OR_RETURN(o.seed, f.GetInt("seed", 1));
  if (o.workers < 1 || o.workers > PrefixIndex::kMaxWorkerSlots || o.entries < o.workers || o.block_size < 1 ||
      o.system_prompts < 1 || o.query_blocks < 130 || o.queries < 1 || o.events < 1 || o.rounds < 1 ||
      o.batch_max < 1) {
    return absl::InvalidArgumentError("a flag is out of range (query-blocks must be at least 130)");
  }
  return o;
}

// The baseline: what each worker holds and in which tier, nothing else.
class NaiveIndex {
 public:
  explicit NaiveIndex(int64_t workers) : sets_(workers) {}
  void Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier, ChainParent /*parent*/) {
    for (const BlockHash& h : hashes) sets_[w.value()][h] = tier;
  }
  void Remove(WorkerSlot w, std::span<const BlockHash> hashes) {
    for (const BlockHash& h : hashes) sets_[w.value()].erase(h);
  }
  std::vector<Overlap> FindOverlaps(std::span<const BlockHash> hashes) const {
    std::vector<Overlap> out;
    for (size_t w = 0; w < sets_.size(); ++w) {
      Overlap o{WorkerSlot(static_cast<int32_t>(w)), 0};
      for (; static_cast<size_t>(o.matched_blocks) < hashes.size(); ++o.matched_blocks) {
        const auto it = sets_[w].find(hashes[static_cast<size_t>(o.matched_blocks)]);
        if (it == sets_[w].end()) break;
        if (it->second == KvTier::kHost) ++o.host_blocks;
        if (it->second == KvTier::kDisk) ++o.disk_blocks;
      }
      if (o.matched_blocks > 0) out.push_back(o);
    }
    return out;
  }

 private:
  std::vector<absl::flat_hash_map<BlockHash, KvTier>> sets_;
};

// Random tokens and their chained hashes.
class ChainMaker {
 public:
  ChainMaker(int64_t block_size, uint64_t seed) : block_size_(block_size), rng_(seed) {}
  std::mt19937_64& rng() { return rng_; }
  // `parent` followed by `blocks` new blocks.
  Chain Extend(const Chain& parent, int64_t blocks) {
    Chain out = parent;
    BlockHash last = parent.empty() ? RootBlockHash("bench-model", "") : parent.back();
    std::vector<int32_t> tokens(block_size_);
    for (int64_t b = 0; b < blocks; ++b) {
      for (int32_t& t : tokens) t = static_cast<int32_t>(rng_() % 49152);
      last = ChainBlockHash(last, tokens);
      out.push_back(last);
    }
    return out;
  }

 private:
  int64_t block_size_;
  std::mt19937_64 rng_;
};

struct Placement {
  WorkerSlot worker;
  size_t conversation;
  size_t blocks;  // a leading part of it
  // Of those, the last `lower` were evicted from the device into `tier`.
  size_t lower = 0;
  KvTier tier = KvTier::kDevice;
};

struct Cluster {
  std::vector<Chain> system_prompts;
  std::vector<Chain> conversations;   // every conversation some worker holds
  std::vector<Placement> placements;  // Store calls that build the cluster
};

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// Conversations: a Zipf-popular system prompt of 16..128 blocks, then the
// conversation's own blocks up to 64..query-blocks in all. Each worker takes
// conversations (30% of the time one another worker already has) until it
// holds entries / workers blocks; its last one may be held only in part.
Cluster PlanCluster(const Options& o, ChainMaker& maker) {
  Cluster c;
  for (int64_t s = 0; s < o.system_prompts; ++s)
    c.system_prompts.push_back(maker.Extend({}, Uniform(maker.rng(), 16, 128)));
  std::vector<double> weights;
  for (int64_t s = 0; s < o.system_prompts; ++s) weights.push_back(1.0 / static_cast<double>(s + 1));
  std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
  PrefixIndex scratch;  // counts what each worker holds while planning
  for (int64_t w = 0; w < o.workers; ++w) {
    const WorkerSlot slot(static_cast<int32_t>(w));
    const int64_t target = o.entries / o.workers + (w < o.entries % o.workers ? 1 : 0);
    while (scratch.BlockCount(slot) < target) {
      size_t pick;
      if (c.conversations.empty() || Uniform(maker.rng(), 0, 9) >= 3) {
        const Chain& sys = c.system_prompts[zipf(maker.rng())];
        const int64_t total = Uniform(maker.rng(), 64, o.query_blocks);
        c.conversations.push_back(maker.Extend(sys, std::max<int64_t>(1, total - static_cast<int64_t>(sys.size()))));
        pick = c.conversations.size() - 1;
      } else {
        pick = Uniform(maker.rng(), 0, static_cast<int64_t>(c.conversations.size()) - 1);
      }
      const Chain& conv = c.conversations[pick];
      // Enough of its leading blocks to reach the target, counting only
      // blocks this worker does not hold yet (the system prompt often is).
      size_t take = 0;
      for (int64_t need = target - scratch.BlockCount(slot); take < conv.size() && need > 0; ++take) {
        if (!scratch.Holds(slot, conv[take])) --need;
      }
      scratch.Store(slot, std::span(conv).first(take));
      // Half the conversations have their tail (a random part) in a lower
      // tier: host memory four times as often as disk.
      Placement p{slot, pick, take};
      if (Uniform(maker.rng(), 0, 1) == 1 && take > 1) {
        p.lower = static_cast<size_t>(Uniform(maker.rng(), 1, static_cast<int64_t>(take) - 1));
        p.tier = Uniform(maker.rng(), 0, 4) == 0 ? KvTier::kDisk : KvTier::kHost;
      }
      c.placements.push_back(p);
    }
  }
  return c;
}

// Heap in use: small chunks plus the mmap'ed ones big tables live in.
size_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Replays the plan into `index`; returns the heap it took and the seconds.
template <typename Index>
std::pair<size_t, double> Build(const Cluster& c, Index& index) {
  const size_t before = HeapBytes();
  const auto start = Clock::now();
  for (const Placement& p : c.placements) {
    const std::span<const BlockHash> held = std::span(c.conversations[p.conversation]).first(p.blocks);
    index.Store(p.worker, held, KvTier::kDevice, ChainParent::Root());
    if (p.lower > 0)
      index.Store(p.worker, held.last(p.lower), p.tier, ChainParent::Of(held[held.size() - p.lower - 1]));
  }
  return {HeapBytes() - before, std::chrono::duration<double>(Clock::now() - start).count()};
}

struct Event {
  WorkerSlot worker;
  Chain hashes;
  KvTier tier = KvTier::kDevice;
  ChainParent parent;  // stores and moves: what hashes[0] hangs from
};

// New conversations' own blocks as Store events in chain order (prefill
// chunks and decode steps commit blocks in batches), the same blocks moved
// down a tier (a Store in host memory, a fifth of them then on to disk,
// as the device and host memory evict), and then as Remove events, tail
// first (LRU eviction).
void MakeEvents(const Options& o, const Cluster& c, ChainMaker& maker, std::vector<Event>& stores,
                std::vector<Event>& moves, std::vector<Event>& removes) {
  while (static_cast<int64_t>(stores.size()) < o.events) {
    const WorkerSlot w(static_cast<int32_t>(Uniform(maker.rng(), 0, o.workers - 1)));
    const Chain& sys = c.system_prompts[Uniform(maker.rng(), 0, o.system_prompts - 1)];
    const Chain conv = maker.Extend(sys, Uniform(maker.rng(), 16, 256));
    std::span<const BlockHash> own = std::span(conv).subspan(sys.size());
    for (size_t at = 0; at < own.size() && static_cast<int64_t>(stores.size()) < o.events;) {
      const size_t n = std::min<size_t>(own.size() - at, Uniform(maker.rng(), 1, o.batch_max));
      const BlockHash& parent = at == 0 ? sys.back() : own[at - 1];
      stores.push_back({w, Chain(own.begin() + at, own.begin() + at + n), KvTier::kDevice, ChainParent::Of(parent)});
      at += n;
    }
  }
  for (const Event& e : stores) {
    moves.push_back({e.worker, e.hashes, KvTier::kHost, e.parent});
    if (Uniform(maker.rng(), 0, 4) == 0) moves.push_back({e.worker, e.hashes, KvTier::kDisk, e.parent});
  }
  for (auto it = stores.rbegin(); it != stores.rend(); ++it) {
    Chain tail_first(it->hashes.rbegin(), it->hashes.rend());
    for (size_t at = 0; at < tail_first.size();) {
      const size_t n = std::min<size_t>(tail_first.size() - at, Uniform(maker.rng(), 1, o.batch_max));
      removes.push_back({it->worker, Chain(tail_first.begin() + at, tail_first.begin() + at + n)});
      at += n;
    }
  }
}

struct IngestResult {
  double store_s = 0, move_s = 0, remove_s = 0;
};

template <typename Index>
IngestResult Ingest(Index& index, const std::vector<Event>& stores, const std::vector<Event>& moves,
                    const std::vector<Event>& removes, int64_t rounds) {
  IngestResult r;
  for (int64_t round = 0; round < rounds; ++round) {
    auto t0 = Clock::now();
    for (const Event& e : stores) index.Store(e.worker, e.hashes, e.tier, e.parent);
    auto t1 = Clock::now();
    for (const Event& e : moves) index.Store(e.worker, e.hashes, e.tier, e.parent);
    auto t2 = Clock::now();
    for (const Event& e : removes) index.Remove(e.worker, e.hashes);
    auto t3 = Clock::now();
    r.store_s += std::chrono::duration<double>(t1 - t0).count();
    r.move_s += std::chrono::duration<double>(t2 - t1).count();
    r.remove_s += std::chrono::duration<double>(t3 - t2).count();
  }
  return r;
}

// Prompts of query-blocks hashes: "hit" continues a conversation of at least
// 7/8 of that length with new blocks; "system" is a system prompt (popular
// ones more often) and then new blocks; "cold" is all new.
std::vector<Chain> MakeQueries(const std::string& kind, const Options& o, const Cluster& c, ChainMaker& maker) {
  std::vector<const Chain*> long_ones;
  for (const Chain& conv : c.conversations) {
    if (static_cast<int64_t>(conv.size()) * 8 >= o.query_blocks * 7) long_ones.push_back(&conv);
  }
  std::vector<double> weights;
  for (int64_t s = 0; s < o.system_prompts; ++s) weights.push_back(1.0 / static_cast<double>(s + 1));
  std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
  std::vector<Chain> out;
  for (int64_t q = 0; q < o.queries; ++q) {
    Chain base;
    if (kind == "hit" && !long_ones.empty()) {
      const Chain& conv = *long_ones[Uniform(maker.rng(), 0, static_cast<int64_t>(long_ones.size()) - 1)];
      base.assign(conv.begin(), conv.begin() + std::min<int64_t>(static_cast<int64_t>(conv.size()), o.query_blocks));
    } else if (kind == "system") {
      base = c.system_prompts[zipf(maker.rng())];
    }
    out.push_back(maker.Extend(base, o.query_blocks - static_cast<int64_t>(base.size())));
  }
  return out;
}

struct Latency {
  double p50_us = 0, p99_us = 0;
  double mean_workers = 0, mean_best = 0;  // workers matched, deepest match
};

template <typename Index>
Latency TimeQueries(const Index& index, const std::vector<Chain>& queries) {
  std::vector<double> us;
  Latency l;
  for (int pass = 0; pass < 2; ++pass) {  // the first pass warms up
    us.clear();
    l.mean_workers = l.mean_best = 0;
    for (const Chain& q : queries) {
      const auto t0 = Clock::now();
      const std::vector<Overlap> found = index.FindOverlaps(q);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      l.mean_workers += static_cast<double>(found.size());
      int32_t best = 0;
      for (const Overlap& o : found) best = std::max(best, o.matched_blocks);
      l.mean_best += best;
    }
  }
  std::sort(us.begin(), us.end());
  const auto rank = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))]; };
  l.p50_us = rank(0.50);
  l.p99_us = rank(0.99);
  l.mean_workers /= static_cast<double>(queries.size());
  l.mean_best /= static_cast<double>(queries.size());
  return l;
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string one, five;
  f >> one >> five;
  return one + " " + five;
}

absl::Status Run(const Options& o) {
  std::printf("# load average (1, 5 min) at start: %s\n", LoadAverage().c_str());
  ChainMaker maker(o.block_size, static_cast<uint64_t>(o.seed));
  const Cluster cluster = PlanCluster(o, maker);
  PrefixIndex index;
  NaiveIndex naive(o.workers);
  const auto [index_bytes, index_s] = Build(cluster, index);
  const auto [naive_bytes, naive_s] = Build(cluster, naive);
  const auto entries = static_cast<double>(index.EntryCount());
  std::printf(
      "cluster: %ld workers, %ld entries (worker, block), %ld distinct hashes, %zu conversations, "
      "block size %ld\n",
      o.workers, index.EntryCount(), index.DistinctHashes(), cluster.conversations.size(), o.block_size);
  std::printf("build: kvfleet %.2f s, %.1f MiB heap (%.1f B per entry); baseline %.2f s, %.1f MiB (%.1f B per entry)\n",
              index_s, static_cast<double>(index_bytes) / (1 << 20), static_cast<double>(index_bytes) / entries,
              naive_s, static_cast<double>(naive_bytes) / (1 << 20), static_cast<double>(naive_bytes) / entries);

  std::vector<Event> stores, moves, removes;
  MakeEvents(o, cluster, maker, stores, moves, removes);
  int64_t stored_hashes = 0, moved_hashes = 0, removed_hashes = 0;
  for (const Event& e : stores) stored_hashes += static_cast<int64_t>(e.hashes.size());
  for (const Event& e : moves) moved_hashes += static_cast<int64_t>(e.hashes.size());
  for (const Event& e : removes) removed_hashes += static_cast<int64_t>(e.hashes.size());
  const IngestResult base_ingest = Ingest(naive, stores, moves, removes, o.rounds);
  const IngestResult kv_ingest = Ingest(index, stores, moves, removes, o.rounds);
  std::printf(
      "\ningest: %ld rounds of %zu Store events (%.1f hashes each) then %zu Remove events (%.1f each); "
      "the index returns to its %ld entries after each round\n",
      o.rounds, stores.size(), static_cast<double>(stored_hashes) / static_cast<double>(stores.size()), removes.size(),
      static_cast<double>(removed_hashes) / static_cast<double>(removes.size()), index.EntryCount());
  std::printf("%-8s %18s %18s %18s %16s\n", "event", "baseline events/s", "kvfleet events/s", "kvfleet hashes/s",
              "kvfleet/baseline");
  const auto ingest_row = [&](const char* name, size_t events, int64_t hashes, double base_s, double kv_s) {
    const double n = static_cast<double>(events) * static_cast<double>(o.rounds);
    std::printf("%-8s %18.0f %18.0f %18.0f %15.2fx\n", name, n / base_s, n / kv_s,
                static_cast<double>(hashes) * static_cast<double>(o.rounds) / kv_s, base_s / kv_s);
    return n / kv_s;
  };
  const double store_rate = ingest_row("Store", stores.size(), stored_hashes, base_ingest.store_s, kv_ingest.store_s);
  ingest_row("Move", moves.size(), moved_hashes, base_ingest.move_s, kv_ingest.move_s);
  const double with_moves_s = kv_ingest.store_s + kv_ingest.move_s;
  const double store_and_move_hashes =
      static_cast<double>(stored_hashes + moved_hashes) * static_cast<double>(o.rounds) / with_moves_s;
  std::printf("Store and Move together: %.2fM hashes/s (%.2fx the baseline)\n", store_and_move_hashes / 1e6,
              (base_ingest.store_s + base_ingest.move_s) / with_moves_s);
  const double remove_rate =
      ingest_row("Remove", removes.size(), removed_hashes, base_ingest.remove_s, kv_ingest.remove_s);

  std::printf("\nFindOverlaps: %ld prompts of %ld hashes (%ld tokens) per kind; latency in us, second pass of two\n",
              o.queries, o.query_blocks, o.query_blocks * o.block_size);
  std::printf("%-8s %14s %14s %14s %14s %11s %11s %9s %9s\n", "prompts", "baseline p50", "baseline p99", "kvfleet p50",
              "kvfleet p99", "ratio p50", "ratio p99", "workers", "deepest");
  double worst_p99 = 0;
  double hit_ratio = 0;
  for (const std::string kind : {"hit", "system", "cold"}) {
    const std::vector<Chain> queries = MakeQueries(kind, o, cluster, maker);
    for (const Chain& q : queries) {  // both must give the same answer
      if (index.FindOverlaps(q) != naive.FindOverlaps(q)) return absl::InternalError("indexes disagree");
    }
    const Latency base = TimeQueries(naive, queries);
    const Latency kv = TimeQueries(index, queries);
    worst_p99 = std::max(worst_p99, kv.p99_us);
    if (kind == "hit") hit_ratio = base.p99_us / kv.p99_us;
    std::printf("%-8s %14.2f %14.2f %14.2f %14.2f %10.1fx %10.1fx %9.1f %9.1f\n", kind.c_str(), base.p50_us,
                base.p99_us, kv.p50_us, kv.p99_us, base.p50_us / kv.p50_us, base.p99_us / kv.p99_us, kv.mean_workers,
                kv.mean_best);
  }
  std::printf("(workers: mean workers matched per prompt; deepest: mean of the deepest match, in blocks)\n\n");
  std::printf("target > 1M events/s: Store %s (%.2fM/s), Remove %s (%.2fM/s)\n", store_rate > 1e6 ? "met" : "MISSED",
              store_rate / 1e6, remove_rate > 1e6 ? "met" : "MISSED", remove_rate / 1e6);
  std::printf("target FindOverlaps p99 < 100 us: %s (worst %.1f us)\n", worst_p99 < 100 ? "met" : "MISSED", worst_p99);
  std::printf("target Store ingest with tier moves >= 1.5M hashes/s: %s (%.2fM/s)\n",
              store_and_move_hashes >= 1.5e6 ? "met" : "MISSED", store_and_move_hashes / 1e6);
  std::printf("target FindOverlaps hit p99 >= 8x the baseline's: %s (%.1fx)\n", hit_ratio >= 8 ? "met" : "MISSED",
              hit_ratio);
  std::printf("# load average (1, 5 min) at end: %s\n", LoadAverage().c_str());
  return index.CheckInvariants();
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (kvfleet::flags::WantsHelp(args)) {
    std::fputs(kvfleet::bench::kUsage, stdout);
    return 0;
  }
  absl::StatusOr<kvfleet::flags::Flags> flags =
      kvfleet::flags::Flags::Parse(args,
                                   {"workers", "entries", "block-size", "system-prompts", "query-blocks", "queries",
                                    "events", "rounds", "batch-max", "seed"},
                                   {});
  if (!flags.ok()) {
    std::fprintf(stderr, "cachemanager_index_bench: %s\n\n%s", flags.status().ToString().c_str(),
                 kvfleet::bench::kUsage);
    return 2;
  }
  absl::StatusOr<kvfleet::bench::Options> options = kvfleet::bench::ReadOptions(*flags);
  absl::Status status = options.ok() ? kvfleet::bench::Run(*options) : options.status();
  if (!status.ok()) {
    std::fprintf(stderr, "cachemanager_index_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
