// FindOverlaps: a walk hash by hash, and bisection along chains known whole
// (README.md in this folder).
#include <algorithm>
#include <deque>
#include <limits>

#include "common/check.h"
#include "services/cachemanager/index/prefix_index.h"

namespace kvfleet::cachemanager {
namespace {

// FindOverlaps intersects the workers still matching (m of them, sorted)
// with a hash's holders (k, sorted) by a merge, O(m + k), while k is at most
// this many times m; beyond that it binary-searches the holders for each
// matching worker, O(m log k). Either way a step costs O(m log k) at worst.
constexpr size_t kMergeFactor = 8;
// How many hashes ahead FindOverlaps prefetches the map's memory: the walk is
// a chain of independent lookups in a table far larger than the caches.
constexpr size_t kPrefetchDistance = 16;
// Once this few workers still match, FindOverlaps walks their own maps: each
// is a small fraction of the shared one, so its lookups mostly hit the caches
// (two small lookups a hash beat one that misses).
constexpr size_t kOwnMapWorkers = 2;
// Once this few workers still match and their chains are whole,
// FindOverlaps bisects the rest of the prompt; more workers mean more
// places where the holders change, and the walk's runs serve them well.
constexpr size_t kBisectWorkers = 4;
// How many of a worker's drops one check of a stretch looks at before it
// splits the stretch instead.
constexpr int kDropsLookedAt = 8;

}  // namespace

size_t PrefixIndex::WalkOwnBlocks(WorkerSlot w, std::span<const BlockHash> hashes, size_t from,
                                  std::array<int32_t, kNumKvTiers>& in_tier) const {
  const HeldBlocks& blocks = workers_[w.value()].held;
  for (size_t j = from; j < std::min(hashes.size(), from + kPrefetchDistance); ++j) blocks.prefetch(hashes[j]);
  size_t i = from;
  for (; i < hashes.size(); ++i) {
    if (i + kPrefetchDistance < hashes.size()) blocks.prefetch(hashes[i + kPrefetchDistance]);
    const auto it = blocks.find(hashes[i]);
    if (it == blocks.end()) break;
    ++in_tier[static_cast<size_t>(it->second.tier)];
  }
  return i;
}

std::vector<Overlap> PrefixIndex::FindOverlaps(std::span<const BlockHash> hashes) const {
  DCHECK(hashes.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  std::vector<Overlap> result;
  if (hashes.empty()) return result;
  for (size_t i = 1; i < std::min(hashes.size(), kPrefetchDistance); ++i) holders_.prefetch(hashes[i]);
  const auto first = holders_.find(hashes[0]);
  if (first == holders_.end()) return result;

  // Workers holding all of hashes[0..i), in increasing slot order, each with
  // how many of those blocks it holds in each tier.
  MatchingList matching;
  for (int32_t e : first->second) matching.push_back({EntrySlot(e)});
  // The common case along a chain: the next blocks have the very same
  // holder entries (same workers, same tiers). Such a run is counted once
  // it ends: `run` blocks held as `*run_holders` says, aligned with matching.
  const Holders* run_holders = &first->second;
  int32_t run = 1;
  const auto flush = [&] {
    if (run_holders == nullptr) return;
    for (size_t k = 0; k < matching.size(); ++k)
      matching[k].in_tier[static_cast<size_t>(EntryTier((*run_holders)[k]))] += run;
    run_holders = nullptr;
    run = 0;
  };
  const auto stop = [&result](const Matching& m, int32_t matched) {
    result.push_back({m.worker, matched, m.in_tier[static_cast<size_t>(KvTier::kHost)],
                      m.in_tier[static_cast<size_t>(KvTier::kDisk)]});
  };
  const auto placed = [this](const Matching& m) { return workers_[m.worker.value()].unplaced == 0; };
  size_t i = 1;
  for (; i < hashes.size() && !matching.empty(); ++i) {
    // Few workers left: skip along their chains if they are whole, else
    // walk their own maps.
    if (matching.size() <= kBisectWorkers && std::all_of(matching.begin(), matching.end(), placed)) {
      flush();
      BisectRest(hashes, i - 1, matching);
      for (const Matching& m : matching) stop(m, m.in_tier[0] + m.in_tier[1] + m.in_tier[2]);
      matching.clear();
      break;
    }
    if (matching.size() <= kOwnMapWorkers) {
      flush();
      for (Matching& m : matching) stop(m, static_cast<int32_t>(WalkOwnBlocks(m.worker, hashes, i, m.in_tier)));
      matching.clear();
      break;
    }
    if (i + kPrefetchDistance < hashes.size()) holders_.prefetch(hashes[i + kPrefetchDistance]);
    const auto it = holders_.find(hashes[i]);
    if (it == holders_.end()) break;  // every matching worker stops here
    const Holders& holders = it->second;
    if (run_holders != nullptr && holders.size() == run_holders->size() &&
        std::equal(holders.begin(), holders.end(), run_holders->begin())) {
      ++run;
      continue;
    }
    flush();
    if (holders.size() == matching.size() &&
        std::equal(matching.begin(), matching.end(), holders.begin(),
                   [](const Matching& m, int32_t e) { return m.worker == EntrySlot(e); })) {
      run_holders = &holders;  // the same workers, other tiers: a new run
      run = 1;
      continue;
    }
    const auto matched = static_cast<int32_t>(i);
    size_t kept = 0;
    const auto keep = [&](const Matching& m, int32_t e) {
      matching[kept] = m;
      ++matching[kept++].in_tier[static_cast<size_t>(EntryTier(e))];
    };
    if (holders.size() <= kMergeFactor * matching.size()) {
      auto h = holders.begin();
      for (const Matching& m : matching) {
        while (h != holders.end() && EntrySlot(*h) < m.worker) ++h;
        if (h != holders.end() && EntrySlot(*h) == m.worker) {
          keep(m, *h);
        } else {
          stop(m, matched);
        }
      }
    } else {
      for (const Matching& m : matching) {
        const auto h = std::lower_bound(holders.begin(), holders.end(), Entry(m.worker, KvTier::kDevice));
        if (h != holders.end() && EntrySlot(*h) == m.worker) {
          keep(m, *h);
        } else {
          stop(m, matched);
        }
      }
    }
    matching.resize(kept);
  }
  flush();
  for (const Matching& m : matching) stop(m, static_cast<int32_t>(i));
  std::sort(result.begin(), result.end(), [](const Overlap& a, const Overlap& b) { return a.worker < b.worker; });
  return result;
}

// The workers in `matching` hold hashes[0..last_counted], counted, and have
// their chains whole (README.md, "Skipping along a chain"): a worker holding
// hashes[k] holds hashes[0..k], so the holders of hashes[k] shrink as k
// grows, and along a stretch without a drop a worker's tier never steps
// back. So when two positions a < b have the same holder entries and no
// holder has a drop on the prompt between them, every position between has
// those entries too. Bisection finds the positions where the entries
// change, a level at a time so that each level's lookups are prefetched
// together, and counts the positions past last_counted.
void PrefixIndex::BisectRest(std::span<const BlockHash> hashes, size_t last_counted, MatchingList& matching) const {
  const size_t n = hashes.size();
  if (last_counted + 1 >= n) return;
  // Drops are listed by depth; position k of the prompt is depth base + k
  // for each matching worker, by its own account (a worker naming false
  // parents can only shift its own).
  absl::InlinedVector<int32_t, kBisectWorkers> base;
  for (const Matching& m : matching) {
    base.push_back(workers_[m.worker.value()].held.find(hashes[last_counted])->second.depth -
                   static_cast<int32_t>(last_counted));
  }
  // Calls visit(c, e) for each entry e of a sorted holder list whose worker
  // is matching[c]; stops early when visit returns false. Lists may name
  // workers that are not matching: broken chains, a query that is not a
  // chain, or a worker that named false parents.
  const auto for_each_matching = [&matching](std::span<const int32_t> entries, auto visit) {
    size_t c = 0;
    for (int32_t e : entries) {
      while (c < matching.size() && matching[c].worker < EntrySlot(e)) ++c;
      if (c == matching.size()) return true;
      if (matching[c].worker == EntrySlot(e) && !visit(c, e)) return false;
    }
    return true;
  };
  // With no broken chain anywhere, a list no longer than `matching` needs no
  // copy: only a lying worker could be in it, and `add` and `no_drop` skip it.
  std::deque<Holders> kept_lists;
  const auto holders_at = [&](size_t k) -> std::span<const int32_t> {
    const auto it = holders_.find(hashes[k]);
    if (it == holders_.end()) return {};
    if (unplaced_workers_ == 0 && it->second.size() <= matching.size()) return it->second;
    Holders& kept = kept_lists.emplace_back();
    for_each_matching(it->second, [&kept](size_t, int32_t e) {
      kept.push_back(e);
      return true;
    });
    return kept;
  };
  // Positions held as `entries` say, `times` of them.
  const auto add = [&](std::span<const int32_t> entries, int32_t times) {
    for_each_matching(entries, [&](size_t c, int32_t e) {
      matching[c].in_tier[static_cast<size_t>(EntryTier(e))] += times;
      return true;
    });
  };
  // Whether no matching worker in `entries` has a drop at a prompt position
  // in [a, b). It looks at a few drops in that range of depths at most (a
  // worker may have many there, on other chains), and says "maybe" past
  // them: that only splits the stretch further, down to single steps,
  // which are exact.
  const auto no_drop = [&](std::span<const int32_t> entries, size_t a, size_t b) {
    return for_each_matching(entries, [&](size_t c, int32_t e) {
      const auto& drops = workers_[EntrySlot(e).value()].drops;
      const int64_t from = int64_t{base[c]} + static_cast<int64_t>(a);
      const int64_t to = int64_t{base[c]} + static_cast<int64_t>(b);
      int looked = 0;
      for (auto it = drops.lower_bound({static_cast<int32_t>(std::max<int64_t>(from, 0)), BlockHash{}});
           it != drops.end() && it->first < to; ++it) {
        if (++looked > kDropsLookedAt) return false;
        if (hashes[static_cast<size_t>(it->first - base[c])] == it->second) return false;
      }
      return true;
    });
  };

  struct Stretch {
    size_t a, b;  // positions a < b, whose entries are known
    std::span<const int32_t> at_a, at_b;
  };
  std::vector<Stretch> level{{last_counted, n - 1, holders_at(last_counted), holders_at(n - 1)}};
  std::vector<Stretch> split;
  while (!level.empty()) {
    split.clear();
    for (const Stretch& s : level) {
      if (s.at_a.empty()) continue;  // nobody holds past a
      if (std::equal(s.at_a.begin(), s.at_a.end(), s.at_b.begin(), s.at_b.end()) && no_drop(s.at_a, s.a, s.b)) {
        add(s.at_a, static_cast<int32_t>(s.b - s.a));  // positions a+1..b
      } else if (s.b == s.a + 1) {
        add(s.at_b, 1);
      } else {
        holders_.prefetch(hashes[(s.a + s.b) / 2]);
        split.push_back(s);
      }
    }
    level.clear();
    for (const Stretch& s : split) {
      const size_t mid = (s.a + s.b) / 2;
      const std::span<const int32_t> at_mid = holders_at(mid);
      level.push_back({s.a, mid, s.at_a, at_mid});
      level.push_back({mid, s.b, at_mid, s.at_b});
    }
  }
}

}  // namespace kvfleet::cachemanager
