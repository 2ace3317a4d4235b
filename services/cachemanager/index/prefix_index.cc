#include "services/cachemanager/index/prefix_index.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::cachemanager {
namespace {

// Deeper than any prompt: a depth past it is unknown.
constexpr int32_t kMaxDepth = 1 << 30;

void CheckSlot(WorkerSlot w) {
  CHECK(w.value() >= 0 && w.value() < PrefixIndex::kMaxWorkerSlots) << "worker slot " << w;
}

}  // namespace

int64_t PrefixIndex::Store(WorkerSlot w, std::span<const BlockHash> hashes, KvTier tier, ChainParent parent) {
  WorkerBlocks& wb = MutableWorker(w);
  int64_t added = 0;
  for (const BlockHash& hash : hashes) {
    const auto [it, inserted] = wb.held.try_emplace(hash);
    if (!inserted) {
      if (it->second.tier != tier) MoveBlock(w, wb, it, tier);
    } else {
      AddBlock(w, wb, it, tier, parent);
      ++added;
    }
    // A caller that names no parent may not be storing a chain either.
    if (parent.kind != ChainParent::Kind::kUnknown) parent = ChainParent::Of(hash);
  }
  entries_ += added;
  return added;
}

int64_t PrefixIndex::Remove(WorkerSlot w, std::span<const BlockHash> hashes) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= workers_.size()) return 0;
  WorkerBlocks& wb = workers_[w.value()];
  int64_t removed = 0;
  for (const BlockHash& hash : hashes) {
    const auto it = wb.held.find(hash);
    if (it == wb.held.end()) continue;
    RemoveBlock(w, wb, it);
    ++removed;
  }
  entries_ -= removed;
  return removed;
}

int64_t PrefixIndex::Clear(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= workers_.size()) return 0;
  WorkerBlocks& wb = workers_[w.value()];
  for (const auto& [hash, block] : wb.held) DropHolder(hash, w);
  const auto removed = static_cast<int64_t>(wb.held.size());
  AdjustUnplaced(wb, -wb.unplaced);
  // A fresh struct (not clear()) gives the memory back: a dead worker's
  // tables must not outlive it.
  wb = WorkerBlocks();
  entries_ -= removed;
  return removed;
}

void PrefixIndex::ReplaceAll(WorkerSlot w, std::span<const BlockHash> hashes, std::span<const ChainParent> parents) {
  CHECK(parents.empty() || parents.size() == hashes.size())
      << parents.size() << " parents for a snapshot of " << hashes.size() << " hashes";
  WorkerBlocks& wb = MutableWorker(w);
  // The snapshot lists the device: kept blocks that were below it are back
  // on it. Their chain is the snapshot's when it names parents, else what
  // they knew of it.
  HeldBlocks next;
  next.reserve(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {
    const BlockHash& hash = hashes[i];
    HeldBlock b;
    if (!parents.empty()) {
      // Never its own parent (as in AddBlock).
      const bool self = parents[i].kind == ChainParent::Kind::kBlock && parents[i].hash == hash;
      b.parent_kind = self ? ChainParent::Kind::kUnknown : parents[i].kind;
      if (b.parent_kind == ChainParent::Kind::kBlock) b.parent = parents[i].hash;
    } else if (const auto old = wb.held.find(hash); old != wb.held.end()) {
      b.parent = old->second.parent;
      b.parent_kind = old->second.parent_kind;
      b.depth = old->second.depth;
    }
    next.emplace(hash, b);
  }
  if (!parents.empty()) PlaceChains(next);
  for (const auto& [hash, block] : wb.held) {
    if (!next.contains(hash)) {
      DropHolder(hash, w);
    } else if (block.tier != KvTier::kDevice) {
      SetHolderEntry(hash, w, KvTier::kDevice);
    }
  }
  for (const auto& [hash, block] : next) {
    if (!wb.held.contains(hash)) AddHolder(hash, w, KvTier::kDevice);
  }
  entries_ += static_cast<int64_t>(next.size()) - static_cast<int64_t>(wb.held.size());
  AdjustUnplaced(wb, -wb.unplaced);
  wb = WorkerBlocks{.held = std::move(next)};
  // Every block is on the device now, so none is a drop; the kids follow
  // from the parents kept.
  for (auto& [hash, block] : wb.held) {
    if (block.parent_kind != ChainParent::Kind::kBlock) continue;
    ChainKids& kids = KidsOf(wb, block.parent);
    ++kids.by_tier[static_cast<size_t>(KvTier::kDevice)];
    if (block.depth >= 0) ++kids.placed;
  }
  int64_t unplaced = 0;
  for (const auto& [hash, block] : wb.held) unplaced += Unplaced(wb, block) ? 1 : 0;
  AdjustUnplaced(wb, unplaced);
}

void PrefixIndex::PlaceChains(HeldBlocks& held) {
  // Depths still to find, and those on the path being followed up.
  constexpr int32_t kToFind = -2;
  constexpr int32_t kOnPath = -3;
  for (auto& [hash, b] : held) {
    b.depth = b.parent_kind == ChainParent::Kind::kRoot ? 0 : b.parent_kind == ChainParent::Kind::kBlock ? kToFind : -1;
  }
  std::vector<HeldBlock*> path;
  for (auto& [hash, start] : held) {
    if (start.depth != kToFind) continue;
    // Up the parents to a block whose depth is settled, then down again:
    // each block is on one path only, so O(blocks) in all.
    path.clear();
    HeldBlock* b = &start;
    int32_t above = -1;  // the depth of the block above the path
    while (true) {
      b->depth = kOnPath;
      path.push_back(b);
      const auto p = held.find(b->parent);
      if (p == held.end() || p->second.depth == kOnPath) break;  // not held, or a cycle: unknown
      if (p->second.depth != kToFind) {
        above = p->second.depth;
        break;
      }
      b = &p->second;
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      // Past kMaxDepth (no real prompt is that long) a depth is unknown.
      above = above >= 0 && above < kMaxDepth ? above + 1 : -1;
      (*it)->depth = above;
    }
  }
}

bool PrefixIndex::Holds(WorkerSlot w, const BlockHash& hash) const {
  CheckSlot(w);
  return static_cast<size_t>(w.value()) < workers_.size() && workers_[w.value()].held.contains(hash);
}

bool PrefixIndex::ChainsWhole(WorkerSlot w) const {
  CheckSlot(w);
  return static_cast<size_t>(w.value()) >= workers_.size() || workers_[w.value()].unplaced == 0;
}

int64_t PrefixIndex::LowerBlockCount(WorkerSlot w, KvTier tier) const {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= workers_.size()) return 0;
  return workers_[w.value()].lower_counts[static_cast<size_t>(tier)];
}

KvTier PrefixIndex::TierOf(WorkerSlot w, const BlockHash& hash) const {
  CHECK(Holds(w, hash)) << "slot " << w << " does not hold " << hash.ToHex();
  return workers_[w.value()].held.find(hash)->second.tier;
}

void PrefixIndex::AdjustUnplaced(WorkerBlocks& wb, int64_t delta) {
  const bool was = wb.unplaced > 0;
  wb.unplaced += delta;
  DCHECK(wb.unplaced >= 0);
  unplaced_workers_ += static_cast<int32_t>(wb.unplaced > 0) - static_cast<int32_t>(was);
}

PrefixIndex::ChainKids& PrefixIndex::KidsOf(WorkerBlocks& wb, const BlockHash& parent) {
  if (const auto it = wb.held.find(parent); it != wb.held.end()) return it->second.kids;
  return wb.orphans[parent];
}

void PrefixIndex::RefreshDrop(WorkerBlocks& wb, const BlockHash& hash, HeldBlock& b) {
  bool drop = false;
  if (b.depth >= 0) {
    for (size_t t = 0; t < static_cast<size_t>(b.tier); ++t) drop = drop || b.kids.by_tier[t] > 0;
  }
  if (drop == b.in_drops) return;
  if (drop) {
    wb.drops.insert({b.depth, hash});
  } else {
    wb.drops.erase({b.depth, hash});
  }
  b.in_drops = drop;
}

void PrefixIndex::AddBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it, KvTier tier, ChainParent parent) {
  const BlockHash& hash = it->first;
  if (parent.kind == ChainParent::Kind::kBlock && parent.hash == hash) parent = {};  // never its own parent
  ChainKids adopted;
  int64_t unplaced = 0;
  if (!wb.orphans.empty()) {
    if (const auto o = wb.orphans.find(hash); o != wb.orphans.end()) {
      adopted = o->second;  // its kids with a depth had lost their parent; no longer
      unplaced -= adopted.placed;
      wb.orphans.erase(o);
    }
  }
  HeldBlock& b = it->second;
  b.tier = tier;
  b.parent_kind = parent.kind;
  b.kids = adopted;
  if (parent.kind == ChainParent::Kind::kRoot) b.depth = 0;
  // One lookup of the parent serves its depth, its kids and its drop.
  const auto p = parent.kind == ChainParent::Kind::kBlock ? wb.held.find(parent.hash) : wb.held.end();
  if (parent.kind == ChainParent::Kind::kBlock) {
    b.parent = parent.hash;
    ChainKids& kids = p != wb.held.end() ? p->second.kids : wb.orphans[parent.hash];
    // Past kMaxDepth (no real prompt is that long) a depth is unknown, so
    // false parents cannot overflow it.
    if (p != wb.held.end() && p->second.depth >= 0 && p->second.depth < kMaxDepth) b.depth = p->second.depth + 1;
    ++kids.by_tier[static_cast<size_t>(tier)];
    if (b.depth >= 0) ++kids.placed;
    if (p != wb.held.end()) RefreshDrop(wb, parent.hash, p->second);
  }
  if (b.depth < 0) ++unplaced;  // a known depth means the parent is held
  AdjustUnplaced(wb, unplaced);
  RefreshDrop(wb, hash, b);
  if (tier != KvTier::kDevice) ++wb.lower_counts[static_cast<size_t>(tier)];
  AddHolder(hash, w, tier);
}

void PrefixIndex::RemoveBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it) {
  const BlockHash hash = it->first;
  const HeldBlock b = std::move(it->second);
  wb.held.erase(it);
  int64_t unplaced = 0;
  if (b.in_drops) wb.drops.erase({b.depth, hash});
  if (!b.kids.empty()) {
    unplaced += b.kids.placed;  // held kids whose parent is gone
    wb.orphans[hash] = b.kids;
  }
  if (b.parent_kind == ChainParent::Kind::kBlock) {
    const auto p = wb.held.find(b.parent);
    if (b.depth < 0 || p == wb.held.end()) --unplaced;
    if (p != wb.held.end()) {
      ChainKids& kids = p->second.kids;
      --kids.by_tier[static_cast<size_t>(b.tier)];
      if (b.depth >= 0) --kids.placed;
      RefreshDrop(wb, b.parent, p->second);
    } else {
      const auto o = wb.orphans.find(b.parent);
      CHECK(o != wb.orphans.end()) << hash.ToHex() << "'s parent has no kids record";
      --o->second.by_tier[static_cast<size_t>(b.tier)];
      if (b.depth >= 0) --o->second.placed;
      if (o->second.empty()) wb.orphans.erase(o);
    }
  } else if (b.depth < 0) {
    --unplaced;
  }
  AdjustUnplaced(wb, unplaced);
  if (b.tier != KvTier::kDevice) --wb.lower_counts[static_cast<size_t>(b.tier)];
  DropHolder(hash, w);
}

void PrefixIndex::MoveBlock(WorkerSlot w, WorkerBlocks& wb, HeldBlocks::iterator it, KvTier tier) {
  HeldBlock& b = it->second;
  const KvTier old = b.tier;
  if (old != KvTier::kDevice) --wb.lower_counts[static_cast<size_t>(old)];
  if (tier != KvTier::kDevice) ++wb.lower_counts[static_cast<size_t>(tier)];
  b.tier = tier;
  RefreshDrop(wb, it->first, b);
  SetHolderEntry(it->first, w, tier);
  if (b.parent_kind == ChainParent::Kind::kBlock) {
    const BlockHash parent = b.parent;
    const auto p = wb.held.find(parent);
    ChainKids& kids = p != wb.held.end() ? p->second.kids : wb.orphans.find(parent)->second;
    --kids.by_tier[static_cast<size_t>(old)];
    ++kids.by_tier[static_cast<size_t>(tier)];
    if (p != wb.held.end()) RefreshDrop(wb, parent, p->second);
  }
}

int64_t PrefixIndex::BlockCount(WorkerSlot w) const {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= workers_.size()) return 0;
  return static_cast<int64_t>(workers_[w.value()].held.size());
}

absl::Status PrefixIndex::CheckInvariants() const {
  int64_t pairs_in_map = 0;
  for (const auto& [hash, holders] : holders_) {
    if (holders.empty()) return absl::InternalError(absl::StrCat("empty holder list for ", hash.ToHex()));
    for (size_t a = 0; a < holders.size(); ++a) {
      const WorkerSlot w = EntrySlot(holders[a]);
      if (w.value() < 0 || static_cast<size_t>(w.value()) >= workers_.size()) {
        return absl::InternalError(absl::StrCat("holder slot ", w.value(), " of ", hash.ToHex(), " has no map"));
      }
      if (a > 0 && !(EntrySlot(holders[a - 1]) < w)) {
        return absl::InternalError(
            absl::StrCat("holders of ", hash.ToHex(), " not strictly increasing at slot ", w.value()));
      }
      const auto held = workers_[w.value()].held.find(hash);
      if (held == workers_[w.value()].held.end()) {
        return absl::InternalError(absl::StrCat("slot ", w.value(), " holds ", hash.ToHex(), " not in its map"));
      }
      if (EntryTier(holders[a]) != held->second.tier) {
        return absl::InternalError(
            absl::StrCat("slot ", w.value(), "'s entry for ", hash.ToHex(), " disagrees with its own map's tier"));
      }
    }
    pairs_in_map += static_cast<int64_t>(holders.size());
  }
  int64_t pairs_in_maps = 0;
  int32_t unplaced_workers = 0;
  for (size_t slot = 0; slot < workers_.size(); ++slot) {
    const WorkerBlocks& wb = workers_[slot];
    const WorkerSlot w(static_cast<int32_t>(slot));
    std::array<int64_t, kNumKvTiers> counted{};
    absl::flat_hash_map<BlockHash, ChainKids> kids;  // recounted from the parents named
    int64_t unplaced = 0;
    absl::btree_set<std::pair<int32_t, BlockHash>> drops;
    for (const auto& [hash, block] : wb.held) {
      const auto it = holders_.find(hash);
      if (it == holders_.end() ||
          std::none_of(it->second.begin(), it->second.end(), [w](int32_t e) { return EntrySlot(e) == w; })) {
        return absl::InternalError(absl::StrCat("slot ", slot, " has ", hash.ToHex(), " but is not its holder"));
      }
      if (block.tier != KvTier::kDevice) ++counted[static_cast<size_t>(block.tier)];
      if (block.parent_kind == ChainParent::Kind::kBlock) {
        ChainKids& k = kids[block.parent];
        ++k.by_tier[static_cast<size_t>(block.tier)];
        if (block.depth >= 0) ++k.placed;
      }
      if ((block.parent_kind == ChainParent::Kind::kRoot) != (block.depth == 0)) {
        return absl::InternalError(
            absl::StrCat("slot ", slot, ": ", hash.ToHex(), " depth ", block.depth, " disagrees with its parent kind"));
      }
      if (Unplaced(wb, block)) ++unplaced;
    }
    for (const auto& [hash, block] : wb.held) {
      const auto k = kids.find(hash);
      if (block.kids != (k == kids.end() ? ChainKids{} : k->second)) {
        return absl::InternalError(absl::StrCat("slot ", slot, ": kids of ", hash.ToHex(), " out of step"));
      }
      bool drop = false;
      for (size_t t = 0; t < static_cast<size_t>(block.tier); ++t) drop = drop || block.kids.by_tier[t] > 0;
      if (drop && block.depth >= 0) drops.insert({block.depth, hash});
      if (block.in_drops != (drop && block.depth >= 0)) {
        return absl::InternalError(absl::StrCat("slot ", slot, ": drop flag of ", hash.ToHex(), " out of step"));
      }
    }
    for (const auto& [hash, k] : wb.orphans) {
      const auto counted_kids = kids.find(hash);
      if (wb.held.contains(hash) || k.empty() || counted_kids == kids.end() || counted_kids->second != k) {
        return absl::InternalError(absl::StrCat("slot ", slot, ": orphan record of ", hash.ToHex(), " out of step"));
      }
    }
    for (const auto& [parent, k] : kids) {
      if (!wb.held.contains(parent) && !wb.orphans.contains(parent)) {
        return absl::InternalError(absl::StrCat("slot ", slot, ": no kids record for ", parent.ToHex()));
      }
    }
    if (drops != wb.drops) return absl::InternalError(absl::StrCat("slot ", slot, " drop set out of step"));
    if (unplaced != wb.unplaced) {
      return absl::InternalError(
          absl::StrCat("slot ", slot, " counts ", wb.unplaced, " unplaced blocks, not ", unplaced));
    }
    unplaced_workers += unplaced > 0 ? 1 : 0;
    pairs_in_maps += static_cast<int64_t>(wb.held.size());
    if (counted != wb.lower_counts) {
      return absl::InternalError(absl::StrCat("slot ", slot, " lower-tier counts out of step"));
    }
  }
  if (unplaced_workers != unplaced_workers_) {
    return absl::InternalError(absl::StrCat(unplaced_workers_, " workers counted unplaced, not ", unplaced_workers));
  }
  if (pairs_in_map != entries_ || pairs_in_maps != entries_) {
    return absl::InternalError(absl::StrCat("entry count ", entries_, " but ", pairs_in_map, " pairs in the map and ",
                                            pairs_in_maps, " in the worker maps"));
  }
  return absl::OkStatus();
}

PrefixIndex::WorkerBlocks& PrefixIndex::MutableWorker(WorkerSlot w) {
  CheckSlot(w);
  if (static_cast<size_t>(w.value()) >= workers_.size()) workers_.resize(w.value() + 1);
  return workers_[w.value()];
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
