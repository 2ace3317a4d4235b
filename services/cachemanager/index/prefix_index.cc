#include "services/cachemanager/index/prefix_index.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

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

void CheckSlot(WorkerSlot w) {
  CHECK(w.value() >= 0 && w.value() < PrefixIndex::kMaxWorkerSlots) << "worker slot " << w;
}

}  // namespace

int64_t PrefixIndex::Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier) {
  BlockTiers& blocks = MutableBlocksOf(w);
  int64_t added = 0;
  for (const BlockHash& hash : hashes) {
    const auto [it, inserted] = blocks.try_emplace(hash, tier);
    if (inserted) {
      AddHolder(hash, w, tier);
      if (tier != KvTier::kDevice) ++lower_counts_[w.value()][static_cast<size_t>(tier)];
      ++added;
    } else if (it->second != tier) {
      MoveTier(w, hash, it->second, tier);
    }
  }
  entries_ += added;
  return added;
}

int64_t PrefixIndex::Remove(WorkerSlot w, std::span<const BlockHash> hashes) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  BlockTiers& blocks = blocks_[w.value()];
  int64_t removed = 0;
  for (const BlockHash& hash : hashes) {
    const auto it = blocks.find(hash);
    if (it == blocks.end()) continue;
    if (it->second != KvTier::kDevice) --lower_counts_[w.value()][static_cast<size_t>(it->second)];
    blocks.erase(it);
    DropHolder(hash, w);
    ++removed;
  }
  entries_ -= removed;
  return removed;
}

int64_t PrefixIndex::Clear(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  BlockTiers& blocks = blocks_[w.value()];
  for (const auto& [hash, tier] : blocks) DropHolder(hash, w);
  const auto removed = static_cast<int64_t>(blocks.size());
  // Assigning a fresh map (not clear()) gives the memory back: a dead
  // worker's table must not outlive it.
  blocks = BlockTiers();
  lower_counts_[w.value()] = {};
  entries_ -= removed;
  return removed;
}

void PrefixIndex::ReplaceAll(WorkerSlot w, std::span<const BlockHash> hashes) {
  BlockTiers& current = MutableBlocksOf(w);
  // The snapshot lists the device: kept blocks that were below it are back on it.
  BlockTiers next;
  next.reserve(hashes.size());
  for (const BlockHash& hash : hashes) next.emplace(hash, KvTier::kDevice);
  for (const auto& [hash, tier] : current) {
    if (!next.contains(hash)) {
      DropHolder(hash, w);
    } else if (tier != KvTier::kDevice) {
      SetHolderEntry(hash, w, KvTier::kDevice);
    }
  }
  for (const auto& [hash, tier] : next) {
    if (!current.contains(hash)) AddHolder(hash, w, KvTier::kDevice);
  }
  entries_ += static_cast<int64_t>(next.size()) - static_cast<int64_t>(current.size());
  current = std::move(next);
  lower_counts_[w.value()] = {};
}

bool PrefixIndex::Holds(WorkerSlot w, const BlockHash& hash) const {
  CheckSlot(w);
  return static_cast<size_t>(w.value()) < blocks_.size() && blocks_[w.value()].contains(hash);
}

int64_t PrefixIndex::LowerBlockCount(WorkerSlot w, KvTier tier) const {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= lower_counts_.size()) return 0;
  return lower_counts_[w.value()][static_cast<size_t>(tier)];
}

void PrefixIndex::MoveTier(WorkerSlot w, const BlockHash& hash, KvTier& held_in, KvTier tier) {
  std::array<int64_t, kNumKvTiers>& counts = lower_counts_[w.value()];
  if (held_in != KvTier::kDevice) --counts[static_cast<size_t>(held_in)];
  if (tier != KvTier::kDevice) ++counts[static_cast<size_t>(tier)];
  held_in = tier;
  SetHolderEntry(hash, w, tier);
}

KvTier PrefixIndex::TierOf(WorkerSlot w, const BlockHash& hash) const {
  CHECK(Holds(w, hash)) << "slot " << w << " does not hold " << hash.ToHex();
  return blocks_[w.value()].find(hash)->second;
}

int64_t PrefixIndex::BlockCount(WorkerSlot w) const {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  return static_cast<int64_t>(blocks_[w.value()].size());
}

size_t PrefixIndex::WalkOwnBlocks(WorkerSlot w, std::span<const BlockHash> hashes, size_t from,
                                  std::array<int32_t, kNumKvTiers>& in_tier) const {
  const BlockTiers& blocks = blocks_[w.value()];
  for (size_t j = from; j < std::min(hashes.size(), from + kPrefetchDistance); ++j) blocks.prefetch(hashes[j]);
  size_t i = from;
  for (; i < hashes.size(); ++i) {
    if (i + kPrefetchDistance < hashes.size()) blocks.prefetch(hashes[i + kPrefetchDistance]);
    const auto it = blocks.find(hashes[i]);
    if (it == blocks.end()) break;
    ++in_tier[static_cast<size_t>(it->second)];
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
  struct Matching {
    WorkerSlot worker;
    std::array<int32_t, kNumKvTiers> in_tier{};
  };
  absl::InlinedVector<Matching, 64> matching;
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
  size_t i = 1;
  for (; i < hashes.size() && !matching.empty(); ++i) {
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

absl::Status PrefixIndex::CheckInvariants() const {
  int64_t pairs_in_map = 0;
  for (const auto& [hash, holders] : holders_) {
    if (holders.empty()) return absl::InternalError(absl::StrCat("empty holder list for ", hash.ToHex()));
    for (size_t a = 0; a < holders.size(); ++a) {
      const WorkerSlot w = EntrySlot(holders[a]);
      if (w.value() < 0 || static_cast<size_t>(w.value()) >= blocks_.size()) {
        return absl::InternalError(absl::StrCat("holder slot ", w.value(), " of ", hash.ToHex(), " has no set"));
      }
      if (a > 0 && !(EntrySlot(holders[a - 1]) < w)) {
        return absl::InternalError(
            absl::StrCat("holders of ", hash.ToHex(), " not strictly increasing at slot ", w.value()));
      }
      const auto held = blocks_[w.value()].find(hash);
      if (held == blocks_[w.value()].end()) {
        return absl::InternalError(absl::StrCat("slot ", w.value(), " holds ", hash.ToHex(), " not in its map"));
      }
      if (EntryTier(holders[a]) != held->second) {
        return absl::InternalError(
            absl::StrCat("slot ", w.value(), "'s entry for ", hash.ToHex(), " disagrees with its own map's tier"));
      }
    }
    pairs_in_map += static_cast<int64_t>(holders.size());
  }
  int64_t pairs_in_sets = 0;
  for (size_t slot = 0; slot < blocks_.size(); ++slot) {
    std::array<int64_t, kNumKvTiers> counted{};
    for (const auto& [hash, tier] : blocks_[slot]) {
      const auto it = holders_.find(hash);
      const WorkerSlot w(static_cast<int32_t>(slot));
      if (it == holders_.end() ||
          std::none_of(it->second.begin(), it->second.end(), [w](int32_t e) { return EntrySlot(e) == w; })) {
        return absl::InternalError(absl::StrCat("slot ", slot, " has ", hash.ToHex(), " but is not its holder"));
      }
      if (tier != KvTier::kDevice) ++counted[static_cast<size_t>(tier)];
    }
    pairs_in_sets += static_cast<int64_t>(blocks_[slot].size());
    if (counted != lower_counts_[slot]) {
      return absl::InternalError(absl::StrCat("slot ", slot, " lower-tier counts out of step"));
    }
  }
  if (pairs_in_map != entries_ || pairs_in_sets != entries_) {
    return absl::InternalError(absl::StrCat("entry count ", entries_, " but ", pairs_in_map, " pairs in the map and ",
                                            pairs_in_sets, " in the worker sets"));
  }
  return absl::OkStatus();
}

PrefixIndex::BlockTiers& PrefixIndex::MutableBlocksOf(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) {
    blocks_.resize(w.value() + 1);
    lower_counts_.resize(w.value() + 1);
  }
  return blocks_[w.value()];
}

void PrefixIndex::AddHolder(const BlockHash& hash, WorkerSlot w, KvTier tier) {
  Holders& holders = holders_[hash];
  const auto pos = std::lower_bound(holders.begin(), holders.end(), Entry(w, KvTier::kDevice));
  DCHECK(pos == holders.end() || EntrySlot(*pos) != w);
  holders.insert(pos, Entry(w, tier));
}

PrefixIndex::HolderEntry PrefixIndex::FindHolderEntry(const BlockHash& hash, WorkerSlot w) {
  const auto it = holders_.find(hash);
  CHECK(it != holders_.end()) << "slot " << w << " held " << hash.ToHex() << " without a map entry";
  Holders& holders = it->second;
  const auto pos = std::lower_bound(holders.begin(), holders.end(), Entry(w, KvTier::kDevice));
  CHECK(pos != holders.end() && EntrySlot(*pos) == w)
      << "slot " << w << " missing from the holders of " << hash.ToHex();
  return {it, pos};
}

void PrefixIndex::DropHolder(const BlockHash& hash, WorkerSlot w) {
  const HolderEntry h = FindHolderEntry(hash, w);
  if (h.holders->second.size() == 1) {
    holders_.erase(h.holders);
  } else {
    h.holders->second.erase(h.entry);
  }
}

void PrefixIndex::SetHolderEntry(const BlockHash& hash, WorkerSlot w, KvTier tier) {
  *FindHolderEntry(hash, w).entry = Entry(w, tier);
}

}  // namespace kvfleet::cachemanager
