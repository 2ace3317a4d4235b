#include "services/worker/server/admitted_tickets.h"

#include <algorithm>

#include "common/check.h"

namespace kvfleet::worker {

AdmittedTickets::AdmittedTickets(int max_routers) : max_routers_(max_routers) { CHECK(max_routers_ >= 1); }

void AdmittedTickets::Record(const v1::PlacementTicket& placement) {
  if (placement.router() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_router_.find(placement.router());
  if (it != by_router_.end()) {
    Entry& e = *it->second;
    e.ticket = std::max(e.ticket, placement.ticket());
    recent_.splice(recent_.begin(), recent_, it->second);
    return;
  }
  recent_.push_front({.router = placement.router(), .ticket = placement.ticket()});
  by_router_[placement.router()] = recent_.begin();
  if (static_cast<int>(recent_.size()) > max_routers_) {
    by_router_.erase(recent_.back().router);
    recent_.pop_back();
  }
}

std::vector<v1::PlacementTicket> AdmittedTickets::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::PlacementTicket> out;
  out.reserve(recent_.size());
  for (const Entry& e : recent_) {
    v1::PlacementTicket& t = out.emplace_back();
    t.set_router(e.router);
    t.set_ticket(e.ticket);
  }
  return out;
}

int AdmittedTickets::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(recent_.size());
}

}  // namespace kvfleet::worker
