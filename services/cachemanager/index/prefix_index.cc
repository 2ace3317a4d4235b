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

void CheckSlot(WorkerSlot w) {
  CHECK(w.value() >= 0 && w.value() < PrefixIndex::kMaxWorkerSlots) << "worker slot " << w;
}

}  // namespace

int64_t PrefixIndex::Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier) {
  absl::flat_hash_set<BlockHash>& blocks = MutableBlocksOf(w);
  absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  int64_t added = 0;
  for (const BlockHash& hash : hashes) {
    if (blocks.insert(hash).second) {
      AddHolder(hash, w, tier);
      if (tier != KvTier::kDevice) {
        lower.emplace(hash, tier);
        ++lower_counts_[w.value()][static_cast<size_t>(tier)];
      }
      ++added;
    } else if (tier != KvTier::kDevice || !lower.empty()) {
      MoveTier(w, hash, tier);
    }
  }
  entries_ += added;
  return added;
}

int64_t PrefixIndex::Remove(WorkerSlot w, std::span<const BlockHash> hashes) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  absl::flat_hash_set<BlockHash>& blocks = blocks_[w.value()];
  absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  int64_t removed = 0;
  for (const BlockHash& hash : hashes) {
    if (blocks.erase(hash) > 0) {
      DropHolder(hash, w);
      if (!lower.empty()) {
        if (const auto it = lower.find(hash); it != lower.end()) {
          --lower_counts_[w.value()][static_cast<size_t>(it->second)];
          lower.erase(it);
        }
      }
      ++removed;
    }
  }
  entries_ -= removed;
  return removed;
}

int64_t PrefixIndex::Clear(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  absl::flat_hash_set<BlockHash>& blocks = blocks_[w.value()];
  for (const BlockHash& hash : blocks) DropHolder(hash, w);
  const auto removed = static_cast<int64_t>(blocks.size());
  // Assigning a fresh set (not clear()) gives the memory back: a dead
  // worker's table must not outlive it.
  blocks = absl::flat_hash_set<BlockHash>();
  lower_[w.value()] = absl::flat_hash_map<BlockHash, KvTier>();
  lower_counts_[w.value()] = {};
  entries_ -= removed;
  return removed;
}

void PrefixIndex::ReplaceAll(WorkerSlot w, std::span<const BlockHash> hashes) {
  absl::flat_hash_set<BlockHash>& current = MutableBlocksOf(w);
  absl::flat_hash_set<BlockHash> next(hashes.begin(), hashes.end());
  // The snapshot lists the device: kept blocks that were below it are back on it.
  const absl::flat_hash_map<BlockHash, KvTier> lower = std::move(lower_[w.value()]);
  lower_[w.value()].clear();
  lower_counts_[w.value()] = {};
  for (const BlockHash& hash : current) {
    if (!next.contains(hash)) {
      DropHolder(hash, w);
    } else if (!lower.empty() && lower.contains(hash)) {
      SetHolderEntry(hash, w, KvTier::kDevice);
    }
  }
  for (const BlockHash& hash : next) {
    if (!current.contains(hash)) AddHolder(hash, w, KvTier::kDevice);
  }
  entries_ += static_cast<int64_t>(next.size()) - static_cast<int64_t>(current.size());
  current = std::move(next);
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

void PrefixIndex::MoveTier(WorkerSlot w, const BlockHash& hash, KvTier tier) {
  absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  std::array<int64_t, kNumKvTiers>& counts = lower_counts_[w.value()];
  const auto it = lower.find(hash);
  const KvTier old = it == lower.end() ? KvTier::kDevice : it->second;
  if (old == tier) return;
  if (old != KvTier::kDevice) --counts[static_cast<size_t>(old)];
  if (tier == KvTier::kDevice) {
    lower.erase(it);
  } else {
    if (it != lower.end()) {
      it->second = tier;
    } else {
      lower.emplace(hash, tier);
    }
    ++counts[static_cast<size_t>(tier)];
  }
  SetHolderEntry(hash, w, tier);
}

KvTier PrefixIndex::TierOf(WorkerSlot w, const BlockHash& hash) const {
  CHECK(Holds(w, hash)) << "slot " << w << " does not hold " << hash.ToHex();
  const auto& lower = lower_[w.value()];
  const auto it = lower.find(hash);
  return it == lower.end() ? KvTier::kDevice : it->second;
}

int64_t PrefixIndex::BlockCount(WorkerSlot w) const {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  return static_cast<int64_t>(blocks_[w.value()].size());
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
      if (!blocks_[w.value()].contains(hash)) {
        return absl::InternalError(absl::StrCat("slot ", w.value(), " holds ", hash.ToHex(), " not in its set"));
      }
      if (EntryTier(holders[a]) != TierOf(w, hash)) {
        return absl::InternalError(
            absl::StrCat("slot ", w.value(), "'s entry for ", hash.ToHex(), " disagrees with its lower-tier map"));
      }
    }
    pairs_in_map += static_cast<int64_t>(holders.size());
  }
  int64_t pairs_in_sets = 0;
  for (size_t slot = 0; slot < blocks_.size(); ++slot) {
    for (const BlockHash& hash : blocks_[slot]) {
      const auto it = holders_.find(hash);
      const WorkerSlot w(static_cast<int32_t>(slot));
      if (it == holders_.end() ||
          std::none_of(it->second.begin(), it->second.end(), [w](int32_t e) { return EntrySlot(e) == w; })) {
        return absl::InternalError(absl::StrCat("slot ", slot, " has ", hash.ToHex(), " but is not its holder"));
      }
    }
    pairs_in_sets += static_cast<int64_t>(blocks_[slot].size());
    std::array<int64_t, kNumKvTiers> counted{};
    for (const auto& [hash, tier] : lower_[slot]) {
      if (!blocks_[slot].contains(hash) || tier == KvTier::kDevice) {
        return absl::InternalError(absl::StrCat("slot ", slot, " has ", hash.ToHex(), " below its device but ",
                                                tier == KvTier::kDevice ? "as device" : "not in its set"));
      }
      ++counted[static_cast<size_t>(tier)];
    }
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

absl::flat_hash_set<BlockHash>& PrefixIndex::MutableBlocksOf(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) {
    blocks_.resize(w.value() + 1);
    lower_.resize(w.value() + 1);
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
