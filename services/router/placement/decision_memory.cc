#include "services/router/placement/decision_memory.h"

#include <algorithm>

#include "common/check.h"

namespace kvfleet::router {

uint32_t DecisionMemory::Intern(const std::string& worker) {
  auto it = slot_of_.find(worker);
  if (it != slot_of_.end()) return it->second;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot] = WorkerState{.name = worker};
  slot_of_.emplace(worker, slot);
  return slot;
}

void DecisionMemory::Release(uint32_t slot) {
  WorkerState& w = slots_[slot];
  slot_of_.erase(w.name);
  w = WorkerState{};
  free_slots_.push_back(slot);
}

void DecisionMemory::Unref(uint32_t slot) {
  WorkerState& w = slots_[slot];
  CHECK(w.refs > 0 && !w.name.empty()) << "slot " << slot << " dropped with no references";
  if (--w.refs == 0) Release(slot);
}

void DecisionMemory::PopPrefix() {
  std::pop_heap(prefix_heap_.begin(), prefix_heap_.end(), ExpiresLater);
  PrefixEntry& e = prefix_heap_.back();
  auto it = pairs_.find(PairKey{e.hash, e.slot});
  if (it != pairs_.end() && it->second.expires > e.expires) {
    // Refreshed since: the entry moves to the pair's expiry (a refresh only
    // updates the map, so a hot prefix costs no heap work per decision).
    e.expires = it->second.expires;
    e.seq = next_seq_++;
    std::push_heap(prefix_heap_.begin(), prefix_heap_.end(), ExpiresLater);
    return;
  }
  // Equal: this entry's pair goes. Missing (retracted) or earlier (retracted,
  // then recorded again with its own entry): only this entry goes.
  if (it != pairs_.end() && it->second.expires == e.expires) pairs_.erase(it);
  const uint32_t slot = e.slot;
  prefix_heap_.pop_back();
  Unref(slot);
}

void DecisionMemory::PopInFlight() {
  const InFlightEntry e = in_flight_fifo_.front();
  in_flight_fifo_.pop_front();
  WorkerState& w = slots_[e.slot];
  if (!e.settled) {
    w.in_flight.requests -= 1;
    w.in_flight.blocks -= e.blocks;
    --in_flight_count_;
  }
  // Tickets leave the FIFO in order, so this one is the slot's oldest if it is still queued there.
  if (!w.tickets.empty() && w.tickets.front() == e.ticket) w.tickets.pop_front();
  Unref(e.slot);
}

bool DecisionMemory::SettleEntry(uint64_t ticket) {
  auto it = std::lower_bound(in_flight_fifo_.begin(), in_flight_fifo_.end(), ticket,
                             [](const InFlightEntry& e, uint64_t t) { return e.ticket < t; });
  if (it == in_flight_fifo_.end() || it->ticket != ticket || it->settled) return false;
  it->settled = true;
  InFlight& f = slots_[it->slot].in_flight;
  f.requests -= 1;
  f.blocks -= it->blocks;
  --in_flight_count_;
  return true;
}

void DecisionMemory::Settle(uint64_t ticket) { SettleEntry(ticket); }

void DecisionMemory::Acknowledge(const std::string& worker, uint64_t ticket) {
  if (ticket == 0) return;
  auto it = slot_of_.find(worker);
  if (it == slot_of_.end()) return;
  std::deque<uint64_t>& tickets = slots_[it->second].tickets;
  while (!tickets.empty() && tickets.front() <= ticket) {
    SettleEntry(tickets.front());
    tickets.pop_front();
  }
}

void DecisionMemory::Retract(const std::string& worker, std::span<const BlockHash> hashes, uint64_t ticket) {
  SettleEntry(ticket);
  auto it = slot_of_.find(worker);
  if (it == slot_of_.end()) return;
  for (const BlockHash& hash : hashes) {
    auto pair = pairs_.find(PairKey{hash, it->second});
    if (pair != pairs_.end() && pair->second.first_ticket == ticket && pair->second.last_ticket == ticket) {
      pairs_.erase(pair);
    }
  }
}

void DecisionMemory::Expire(Clock::time_point now) {
  while (!prefix_heap_.empty() && prefix_heap_.front().expires <= now) PopPrefix();
  while (!in_flight_fifo_.empty() && in_flight_fifo_.front().expires <= now) PopInFlight();
}

uint64_t DecisionMemory::Record(const std::string& worker, std::span<const BlockHash> hashes, int32_t new_blocks,
                                Clock::time_point now, std::optional<Clock::duration> prefix_ttl) {
  const Clock::duration ttl = limits_.prefix_ttl > Clock::duration::zero() ? prefix_ttl.value_or(limits_.prefix_ttl)
                                                                           : Clock::duration::zero();
  const bool remember_prefix = ttl > Clock::duration::zero() && !hashes.empty();
  const bool count_in_flight = limits_.in_flight_ttl > Clock::duration::zero();
  const uint64_t ticket = next_ticket_++;
  if (!remember_prefix && !count_in_flight) return ticket;
  const uint32_t slot = Intern(worker);
  if (remember_prefix) {
    const Clock::time_point expires = now + ttl;
    for (const BlockHash& hash : hashes) {
      auto [it, inserted] =
          pairs_.try_emplace(PairKey{hash, slot}, Held{.expires = expires, .first_ticket = ticket, .last_ticket = ticket});
      if (!inserted) {
        // Its heap entry catches up when it reaches the top (PopPrefix).
        it->second.expires = std::max(it->second.expires, expires);
        it->second.last_ticket = ticket;
        continue;
      }
      prefix_heap_.push_back({.hash = hash, .slot = slot, .expires = expires, .seq = next_seq_++});
      std::push_heap(prefix_heap_.begin(), prefix_heap_.end(), ExpiresLater);
      ++slots_[slot].refs;
    }
  }
  if (count_in_flight) {
    in_flight_fifo_.push_back(
        {.slot = slot, .expires = now + limits_.in_flight_ttl, .blocks = new_blocks, .ticket = ticket});
    WorkerState& w = slots_[slot];
    w.refs += 1;
    w.in_flight.requests += 1;
    w.in_flight.blocks += new_blocks;
    w.tickets.push_back(ticket);
    ++in_flight_count_;
  }
  // The caps may drop this very decision's entries; its refs were counted
  // above, so the slot is freed only if all of them go.
  while (static_cast<int64_t>(prefix_heap_.size()) > limits_.max_blocks) PopPrefix();
  while (static_cast<int64_t>(in_flight_fifo_.size()) > limits_.max_in_flight) PopInFlight();
  return ticket;
}

std::vector<int32_t> DecisionMemory::RememberedBlocks(std::span<const BlockHash> hashes,
                                                      std::span<const std::string> workers,
                                                      Clock::time_point now) const {
  std::vector<int32_t> depth(workers.size(), 0);
  if (pairs_.empty() || hashes.empty()) return depth;
  for (size_t w = 0; w < workers.size(); ++w) {
    auto slot = slot_of_.find(workers[w]);
    if (slot == slot_of_.end()) continue;
    auto held = [&](size_t i) {
      auto it = pairs_.find(PairKey{hashes[i], slot->second});
      return it != pairs_.end() && it->second.expires > now;
    };
    // held(i) implies held(j) for every j < i (see the header): find the
    // last held block by binary search, checking both ends first.
    if (!held(0)) continue;
    const size_t n = hashes.size();
    if (held(n - 1)) {
      depth[w] = static_cast<int32_t>(n);
      continue;
    }
    size_t lo = 0, hi = n - 1;  // held(lo), !held(hi)
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (held(mid) ? lo : hi) = mid;
    }
    depth[w] = static_cast<int32_t>(lo + 1);
  }
  return depth;
}

DecisionMemory::InFlight DecisionMemory::InFlightLoad(const std::string& worker) const {
  auto it = slot_of_.find(worker);
  return it == slot_of_.end() ? InFlight{} : slots_[it->second].in_flight;
}

void DecisionMemory::Forget(const std::string& worker) {
  auto it = slot_of_.find(worker);
  if (it == slot_of_.end()) return;
  const uint32_t slot = it->second;
  absl::erase_if(pairs_, [&](const auto& p) { return p.first.slot == slot; });
  // The slot will be reused: no entry may still name it.
  std::erase_if(prefix_heap_, [&](const PrefixEntry& e) { return e.slot == slot; });
  std::make_heap(prefix_heap_.begin(), prefix_heap_.end(), ExpiresLater);
  std::erase_if(in_flight_fifo_, [&](const InFlightEntry& e) { return e.slot == slot; });
  in_flight_count_ -= slots_[slot].in_flight.requests;
  Release(slot);
}

}  // namespace kvfleet::router
