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
constexpr size_t kPrefetchDistance = 8;

void CheckSlot(WorkerSlot w) {
  CHECK(w.value() >= 0 && w.value() < PrefixIndex::kMaxWorkerSlots) << "worker slot " << w;
}

}  // namespace

int64_t PrefixIndex::Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier) {
  absl::flat_hash_set<BlockHash>& blocks = MutableBlocksOf(w);
  const absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  int64_t added = 0;
  for (const BlockHash& hash : hashes) {
    if (blocks.insert(hash).second) {
      AddHolder(hash, w);
      ++added;
    }
    if (tier != KvTier::kDevice || !lower.empty()) SetLowerTier(w, hash, tier);
  }
  entries_ += added;
  return added;
}

int64_t PrefixIndex::Remove(WorkerSlot w, std::span<const BlockHash> hashes) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= blocks_.size()) return 0;
  absl::flat_hash_set<BlockHash>& blocks = blocks_[w.value()];
  const absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  int64_t removed = 0;
  for (const BlockHash& hash : hashes) {
    if (blocks.erase(hash) > 0) {
      DropHolder(hash, w);
      if (!lower.empty()) SetLowerTier(w, hash, KvTier::kDevice);
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
  for (const BlockHash& hash : current) {
    if (!next.contains(hash)) DropHolder(hash, w);
  }
  for (const BlockHash& hash : next) {
    if (!current.contains(hash)) AddHolder(hash, w);
  }
  entries_ += static_cast<int64_t>(next.size()) - static_cast<int64_t>(current.size());
  current = std::move(next);
  lower_[w.value()].clear();
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

void PrefixIndex::SetLowerTier(WorkerSlot w, const BlockHash& hash, KvTier tier) {
  absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[w.value()];
  std::array<int64_t, kNumKvTiers>& counts = lower_counts_[w.value()];
  const auto it = lower.find(hash);
  if (it != lower.end()) {
    if (it->second == tier) return;
    --counts[static_cast<size_t>(it->second)];
    if (tier == KvTier::kDevice) {
      lower.erase(it);
      return;
    }
    it->second = tier;
  } else {
    if (tier == KvTier::kDevice) return;
    lower.emplace(hash, tier);
  }
  ++counts[static_cast<size_t>(tier)];
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

  // Workers holding all of hashes[0..i), in increasing slot order.
  absl::InlinedVector<WorkerSlot, 64> matching(first->second.begin(), first->second.end());
  size_t i = 1;
  for (; i < hashes.size() && !matching.empty(); ++i) {
    if (i + kPrefetchDistance < hashes.size()) holders_.prefetch(hashes[i + kPrefetchDistance]);
    const auto it = holders_.find(hashes[i]);
    if (it == holders_.end()) break;  // every matching worker stops here
    const Holders& holders = it->second;
    // The common case along a chain: the same workers hold the next block.
    if (std::equal(matching.begin(), matching.end(), holders.begin(), holders.end())) continue;
    const auto matched = static_cast<int32_t>(i);
    size_t kept = 0;
    if (holders.size() <= kMergeFactor * matching.size()) {
      auto h = holders.begin();
      for (WorkerSlot w : matching) {
        while (h != holders.end() && *h < w) ++h;
        if (h != holders.end() && *h == w) {
          matching[kept++] = w;
        } else {
          result.push_back({w, matched});
        }
      }
    } else {
      for (WorkerSlot w : matching) {
        if (std::binary_search(holders.begin(), holders.end(), w)) {
          matching[kept++] = w;
        } else {
          result.push_back({w, matched});
        }
      }
    }
    matching.resize(kept);
  }
  for (WorkerSlot w : matching) result.push_back({w, static_cast<int32_t>(i)});
  std::sort(result.begin(), result.end(), [](const Overlap& a, const Overlap& b) { return a.worker < b.worker; });
  // Which matched blocks sit below a device: only workers with lower tiers
  // pay for the lookups.
  for (Overlap& o : result) {
    const absl::flat_hash_map<BlockHash, KvTier>& lower = lower_[o.worker.value()];
    if (lower.empty()) continue;
    for (int32_t b = 0; b < o.matched_blocks; ++b) {
      const auto it = lower.find(hashes[static_cast<size_t>(b)]);
      if (it == lower.end()) continue;
      ++(it->second == KvTier::kHost ? o.host_blocks : o.disk_blocks);
    }
  }
  return result;
}

absl::Status PrefixIndex::CheckInvariants() const {
  int64_t pairs_in_map = 0;
  for (const auto& [hash, holders] : holders_) {
    if (holders.empty()) return absl::InternalError(absl::StrCat("empty holder list for ", hash.ToHex()));
    for (size_t a = 0; a < holders.size(); ++a) {
      const WorkerSlot w = holders[a];
      if (w.value() < 0 || static_cast<size_t>(w.value()) >= blocks_.size()) {
        return absl::InternalError(absl::StrCat("holder slot ", w.value(), " of ", hash.ToHex(), " has no set"));
      }
      if (a > 0 && !(holders[a - 1] < w)) {
        return absl::InternalError(
            absl::StrCat("holders of ", hash.ToHex(), " not strictly increasing at slot ", w.value()));
      }
      if (!blocks_[w.value()].contains(hash)) {
        return absl::InternalError(absl::StrCat("slot ", w.value(), " holds ", hash.ToHex(), " not in its set"));
      }
    }
    pairs_in_map += static_cast<int64_t>(holders.size());
  }
  int64_t pairs_in_sets = 0;
  for (size_t slot = 0; slot < blocks_.size(); ++slot) {
    for (const BlockHash& hash : blocks_[slot]) {
      const auto it = holders_.find(hash);
      if (it == holders_.end() ||
          !std::binary_search(it->second.begin(), it->second.end(), WorkerSlot(static_cast<int32_t>(slot)))) {
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

void PrefixIndex::AddHolder(const BlockHash& hash, WorkerSlot w) {
  Holders& holders = holders_[hash];
  const auto pos = std::lower_bound(holders.begin(), holders.end(), w);
  DCHECK(pos == holders.end() || *pos != w);
  holders.insert(pos, w);
}

void PrefixIndex::DropHolder(const BlockHash& hash, WorkerSlot w) {
  const auto it = holders_.find(hash);
  CHECK(it != holders_.end()) << "slot " << w << " held " << hash.ToHex() << " without a map entry";
  Holders& holders = it->second;
  const auto pos = std::lower_bound(holders.begin(), holders.end(), w);
  CHECK(pos != holders.end() && *pos == w) << "slot " << w << " missing from the holders of " << hash.ToHex();
  if (holders.size() == 1) {
    holders_.erase(it);
  } else {
    holders.erase(pos);
  }
}

}  // namespace kvfleet::cachemanager
