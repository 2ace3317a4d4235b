// A KvEventListener that records every call in order and keeps the view a
// subscriber would build from them (the set of hashes stored and not yet
// removed), like the cachemanager does. Calls that no correct pool makes —
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

#include "absl/container/flat_hash_set.h"
#include "common/block_hash.h"
#include "engine/kv/kv_event_listener.h"

namespace kvfleet::testing {

struct KvEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kCleared;
  BlockHash hash;                   // kStored, kRemoved
  std::optional<BlockHash> parent;  // kStored

  static KvEvent Stored(const BlockHash& h, const std::optional<BlockHash>& p) { return {Kind::kStored, h, p}; }
  static KvEvent Removed(const BlockHash& h) { return {Kind::kRemoved, h, std::nullopt}; }
  static KvEvent Cleared() { return {Kind::kCleared, BlockHash{}, std::nullopt}; }

  bool operator==(const KvEvent&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const KvEvent& e) {
    switch (e.kind) {
      case Kind::kStored:
        return os << "Stored(" << e.hash.ToHex() << ", parent " << (e.parent ? e.parent->ToHex() : "none") << ")";
      case Kind::kRemoved:
        return os << "Removed(" << e.hash.ToHex() << ")";
      case Kind::kCleared:
        return os << "Cleared";
    }
    return os;
  }
};

class RecordingKvListener : public engine::KvEventListener {
 public:
  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override {
    events_.push_back(KvEvent::Stored(hash, parent));
    if (!live_.insert(hash).second) errors_.push_back("stored twice without removal: " + hash.ToHex());
  }
  void OnBlockRemoved(const BlockHash& hash) override {
    events_.push_back(KvEvent::Removed(hash));
    if (live_.erase(hash) == 0) errors_.push_back("removed but not stored: " + hash.ToHex());
  }
  void OnAllCleared() override {
    events_.push_back(KvEvent::Cleared());
    live_.clear();
  }
  void OnSnapshot(std::span<const BlockHash> hashes) override {
    snapshots_.emplace_back(hashes.begin(), hashes.end());
  }
  // Every snapshot received, oldest first.
  const std::vector<std::vector<BlockHash>>& snapshots() const { return snapshots_; }

  const std::vector<KvEvent>& events() const { return events_; }
  // Stored minus removed since the last clear.
  const absl::flat_hash_set<BlockHash>& live() const { return live_; }
  const std::vector<std::string>& errors() const { return errors_; }
  void ClearEvents() { events_.clear(); }

 private:
  std::vector<KvEvent> events_;
  std::vector<std::vector<BlockHash>> snapshots_;
  absl::flat_hash_set<BlockHash> live_;
  std::vector<std::string> errors_;
};

}  // namespace kvfleet::testing
