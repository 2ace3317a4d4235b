// A KvEventListener that records every call in order and keeps the view a
// subscriber would build from them (the set of hashes stored and not yet
// removed, with the tier each one is best held in), like the cachemanager does. Calls that no correct pool makes —
// storing a hash already live, removing one that is not — are collected in
// errors() instead of aborting, so tests can report them.
//
//   RecordingKvListener listener;
//   BlockPool pool(8, &listener);
//   ... EXPECT_THAT(listener.events(), ElementsAre(...)); EXPECT_TRUE(listener.errors().empty());
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/block_hash.h"
#include "engine/kv/kv_event_listener.h"

namespace kvfleet::testing {

struct KvEvent {
  enum class Kind { kStored, kRemoved, kCleared, kMoved };
  Kind kind = Kind::kCleared;
  BlockHash hash;                   // kStored, kRemoved, kMoved
  std::optional<BlockHash> parent;  // kStored, kMoved
  KvTier tier = KvTier::kDevice;    // kMoved

  static KvEvent Stored(const BlockHash& h, const std::optional<BlockHash>& p) { return {Kind::kStored, h, p}; }
  static KvEvent Removed(const BlockHash& h) { return {Kind::kRemoved, h, std::nullopt}; }
  static KvEvent Cleared() { return {Kind::kCleared, BlockHash{}, std::nullopt}; }
  static KvEvent Moved(const BlockHash& h, const std::optional<BlockHash>& p, KvTier t) {
    return {Kind::kMoved, h, p, t};
  }

  bool operator==(const KvEvent&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const KvEvent& e) {
    switch (e.kind) {
      case Kind::kStored:
        return os << "Stored(" << e.hash.ToHex() << ", parent " << (e.parent ? e.parent->ToHex() : "none") << ")";
      case Kind::kRemoved:
        return os << "Removed(" << e.hash.ToHex() << ")";
      case Kind::kCleared:
        return os << "Cleared";
      case Kind::kMoved:
        return os << "Moved(" << e.hash.ToHex() << " to " << KvTierName(e.tier) << ")";
    }
    return os;
  }
};

class RecordingKvListener : public engine::KvEventListener {
 public:
  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override {
    events_.push_back(KvEvent::Stored(hash, parent));
    // A block held below the device may be stored again (loaded back).
    const auto [it, added] = tier_of_.try_emplace(hash, KvTier::kDevice);
    if (!added && it->second == KvTier::kDevice) errors_.push_back("stored twice without removal: " + hash.ToHex());
    it->second = KvTier::kDevice;
    live_.insert(hash);
  }
  void OnBlockRemoved(const BlockHash& hash) override {
    events_.push_back(KvEvent::Removed(hash));
    tier_of_.erase(hash);
    if (live_.erase(hash) == 0) errors_.push_back("removed but not stored: " + hash.ToHex());
  }
  // A move may also be a block's first announcement (a restart's disk tier).
  void OnBlockMoved(const BlockHash& hash, const std::optional<BlockHash>& parent, KvTier tier) override {
    events_.push_back(KvEvent::Moved(hash, parent, tier));
    tier_of_[hash] = tier;
    live_.insert(hash);
  }
  void OnAllCleared() override {
    events_.push_back(KvEvent::Cleared());
    live_.clear();
    tier_of_.clear();
  }
  void OnSnapshot(std::span<const engine::CachedBlock> blocks) override {
    snapshots_.emplace_back(blocks.begin(), blocks.end());
  }
  // Every snapshot received, oldest first.
  const std::vector<std::vector<engine::CachedBlock>>& snapshots() const { return snapshots_; }

  const std::vector<KvEvent>& events() const { return events_; }
  // Stored (at any tier) minus removed since the last clear.
  const absl::flat_hash_set<BlockHash>& live() const { return live_; }
  // The best tier a live hash was last announced in; nullopt when not live.
  std::optional<KvTier> tier_of(const BlockHash& hash) const {
    const auto it = tier_of_.find(hash);
    return it == tier_of_.end() ? std::nullopt : std::optional<KvTier>(it->second);
  }
  const std::vector<std::string>& errors() const { return errors_; }
  void ClearEvents() { events_.clear(); }

 private:
  std::vector<KvEvent> events_;
  std::vector<std::vector<engine::CachedBlock>> snapshots_;
  absl::flat_hash_set<BlockHash> live_;
  absl::flat_hash_map<BlockHash, KvTier> tier_of_;
  std::vector<std::string> errors_;
};

}  // namespace kvfleet::testing
