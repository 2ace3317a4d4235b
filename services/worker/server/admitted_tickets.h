// Per router, the newest placement ticket this worker has admitted. A load
// report carries the list, so a router can tell which of its decisions the
// report already counts (it drops those from its own in-flight load) and
// which it does not yet (it keeps counting them): no time window to guess.
//
// A watermark, not a set: two requests of one router admitted out of order
// (concurrent calls) acknowledge the earlier ticket a moment before its own
// admission; the router then undercounts that request for at most the gap.
//
// Bounded: at most `max_routers` routers, the least recently seen dropped
// first (a router restarted under a new random id is a new router; the old
// one's entry ages out). A dropped router's decisions then look unreported,
// so it counts them itself until they end: the safe side.
//
// Thread-safety: all methods are thread-safe.
//
//   AdmittedTickets admitted;
//   admitted.Record(request.placement());        // after engine.Submit succeeded
//   *report.mutable_admitted() = {...admitted.Snapshot()};
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "kvfleet/v1/types.pb.h"

namespace kvfleet::worker {

class AdmittedTickets {
 public:
  static constexpr int kDefaultMaxRouters = 64;
  explicit AdmittedTickets(int max_routers = kDefaultMaxRouters);

  // A request carrying `placement` was admitted; an unset one (router 0, a
  // client that is not a router) is ignored. Tickets only move forward.
  void Record(const v1::PlacementTicket& placement);

  // Every router's newest admitted ticket, most recently seen first.
  std::vector<v1::PlacementTicket> Snapshot() const;
  int size() const;

 private:
  struct Entry {
    uint64_t router;
    uint64_t ticket;
  };
  const int max_routers_;
  mutable std::mutex mu_;
  std::list<Entry> recent_ ABSL_GUARDED_BY(mu_);  // most recently seen first
  absl::flat_hash_map<uint64_t, std::list<Entry>::iterator> by_router_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::worker
