// The placement simulator's lower KV tiers (placement_sim.h): a worker's
// host and disk tiers as hash LRUs, without bytes, between its block pool
// and its event recorder, as the engine's KvTierManager sits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/placement_sim.h"
#include "common/block_hash.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_event_listener.h"
#include "engine/kv/lower_kv_tiers.h"

namespace kvfleet::bench::placement_sim {

// A worker's host and disk tiers as hash LRUs (no bytes): what the device
// evicts goes to host, host's least recently used to disk; a prefix lookup
// that misses on the device takes a block from either at once and charges
// its load time (block bytes over the tier's bandwidth) to the next step.
// It sits between the pool's listeners and the event recorder, announcing
// each block's best tier as the engine's KvTierManager does.
class SimTiers final : public engine::KvEventListener, public engine::BlockEvictionHook, public engine::LowerKvTiers {
 public:
  SimTiers(const SimOptions& o, engine::KvEventListener* next)
      : next_(next),
        host_blocks_(o.host_tier_tokens / o.cluster.block_size),
        disk_blocks_(o.disk_tier_tokens / o.cluster.block_size),
        host_seconds_(BlockSeconds(o, o.host_gb_per_s)),
        disk_seconds_(BlockSeconds(o, o.disk_gb_per_s)) {}

  static double BlockSeconds(const SimOptions& o, double gb_per_s) {
    return static_cast<double>(o.kv_bytes_per_token * o.cluster.block_size) / (gb_per_s * 1e9);
  }
  void Attach(engine::BlockPool& pool) {
    pool_ = &pool;
    pool.set_eviction_hook(this);
  }
  int64_t host_blocks() const { return host_blocks_; }
  int64_t disk_blocks() const { return disk_blocks_; }
  double host_seconds() const { return host_seconds_; }
  double disk_seconds() const { return disk_seconds_; }
  // Load time owed since the last call, and blocks loaded.
  double TakeLoadSeconds() { return std::exchange(load_seconds_, 0.0); }
  int64_t loaded_blocks() const { return loaded_; }

  void OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) override {
    on_device_.insert(hash);
    next_->OnBlockStored(hash, parent);
  }
  void OnBlockRemoved(const BlockHash& hash) override {
    on_device_.erase(hash);
    Announce(hash);
  }
  void OnAllCleared() override { next_->OnAllCleared(); }
  void BeforeEvict(BlockId, const BlockHash& hash, bool /*published: the simulator's are*/) override {
    if (host_blocks_ > 0) {
      if (Touch(host_, hash)) return;
      Put(host_, host_blocks_, hash, [this](const BlockHash& h) { ToDisk(h); });
    } else {
      ToDisk(hash);
    }
  }
  std::optional<BlockId> LoadFromHost(const BlockHash& hash) override {
    const bool host = Touch(host_, hash);
    const bool disk = !host && Touch(disk_, hash);
    if (!host && !disk) return std::nullopt;
    const std::optional<BlockId> block = pool_->Allocate();
    if (!block) return std::nullopt;
    pool_->Commit(*block, hash, std::nullopt);
    load_seconds_ += host ? host_seconds_ : disk_seconds_;
    ++loaded_;
    return block;
  }
  bool InHost(const BlockHash& hash) const override { return host_.where.contains(hash) || disk_.where.contains(hash); }
  void TouchHost(const BlockHash&) override {}
  bool OnDiskOnly(const BlockHash&) const override { return false; }  // disk loads come through LoadFromHost
  bool has_disk() const override { return false; }
  void StartDiskLoad(RequestId, std::vector<BlockHash>) override {}
  bool loads_in_flight() const override { return false; }

 private:
  struct Lru {
    std::list<BlockHash> order;  // least recently used first
    absl::flat_hash_map<BlockHash, std::list<BlockHash>::iterator> where;
  };
  static bool Touch(Lru& lru, const BlockHash& h) {
    const auto it = lru.where.find(h);
    if (it == lru.where.end()) return false;
    lru.order.splice(lru.order.end(), lru.order, it->second);
    return true;
  }
  template <typename Spill>
  void Put(Lru& lru, int64_t capacity, const BlockHash& h, Spill spill) {
    lru.order.push_back(h);
    lru.where[h] = std::prev(lru.order.end());
    if (static_cast<int64_t>(lru.order.size()) <= capacity) return;
    const BlockHash victim = lru.order.front();
    lru.order.pop_front();
    lru.where.erase(victim);
    spill(victim);
    Announce(victim);
  }
  void ToDisk(const BlockHash& h) {
    if (disk_blocks_ == 0 || on_device_.contains(h) || Touch(disk_, h)) return;
    Put(disk_, disk_blocks_, h, [](const BlockHash&) {});
  }
  void Announce(const BlockHash& h) {
    if (on_device_.contains(h)) return;
    if (host_.where.contains(h)) {
      next_->OnBlockMoved(h, std::nullopt, KvTier::kHost);
    } else if (disk_.where.contains(h)) {
      next_->OnBlockMoved(h, std::nullopt, KvTier::kDisk);
    } else {
      next_->OnBlockRemoved(h);
    }
  }

  engine::KvEventListener* next_;
  engine::BlockPool* pool_ = nullptr;
  const int64_t host_blocks_, disk_blocks_;
  const double host_seconds_, disk_seconds_;
  absl::flat_hash_set<BlockHash> on_device_;
  Lru host_, disk_;
  double load_seconds_ = 0;
  int64_t loaded_ = 0;
};

}  // namespace kvfleet::bench::placement_sim
