#include "engine/kv/kv_leases.h"

#include <algorithm>

namespace kvfleet::engine {

KvLeases::KvLeases(BlockPool& pool, int32_t max_blocks) : pool_(pool), max_blocks_(std::max(max_blocks, 0)) {}

KvLeases::~KvLeases() {
  while (!leases_.empty()) End(leases_.begin());
}

void KvLeases::End(absl::flat_hash_map<std::string, Lease>::iterator it) {
  // The last first, as a request's blocks: a sequence's tail is evicted
  // before its head.
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) pool_.Release(*b);
  leased_blocks_ -= static_cast<int32_t>(it->second.blocks.size());
  leases_.erase(it);
}

int32_t KvLeases::Hold(const std::string& id, std::span<const BlockHash> hashes, Clock::time_point deadline) {
  if (auto it = leases_.find(id); it != leases_.end()) End(it);
  const int32_t wanted = std::min(static_cast<int32_t>(hashes.size()), max_blocks_);
  // Room under the bound: the oldest leases end first.
  while (!leases_.empty() && leased_blocks_ + wanted > max_blocks_) {
    auto oldest = std::min_element(leases_.begin(), leases_.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    End(oldest);
    ++counters_.displaced;
  }
  Lease lease{.deadline = deadline, .order = next_order_++};
  for (int32_t i = 0; i < wanted; ++i) {
    const std::optional<BlockId> block = pool_.AcquireCached(hashes[static_cast<size_t>(i)]);
    if (!block.has_value()) break;
    lease.blocks.push_back(*block);
  }
  const int32_t held = static_cast<int32_t>(lease.blocks.size());
  if (held == 0) return 0;
  leased_blocks_ += held;
  leases_.emplace(id, std::move(lease));
  ++counters_.held;
  return held;
}

bool KvLeases::Release(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  End(it);
  ++counters_.released;
  return true;
}

bool KvLeases::Renew(const std::string& id, Clock::time_point deadline) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  it->second.deadline = deadline;
  ++counters_.renewed;
  return true;
}

int32_t KvLeases::Expire(Clock::time_point now) {
  int32_t ended = 0;
  for (auto it = leases_.begin(); it != leases_.end();) {
    auto next = std::next(it);
    if (it->second.deadline <= now) {
      End(it);
      ++ended;
    }
    it = next;
  }
  counters_.expired += ended;
  return ended;
}

std::optional<KvLeases::Clock::time_point> KvLeases::NextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, lease] : leases_) {
    if (!next.has_value() || lease.deadline < *next) next = lease.deadline;
  }
  return next;
}

void KvLeases::CountReferences(std::vector<int32_t>& refs) const {
  for (const auto& [id, lease] : leases_) {
    for (BlockId b : lease.blocks) ++refs[static_cast<size_t>(b.value())];
  }
}

}  // namespace kvfleet::engine
