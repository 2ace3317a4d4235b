#include "services/router/placement/decision.h"

namespace kvfleet::router {

std::string_view ReasonName(Reason reason) {
  switch (reason) {
    case Reason::kPrefixHit:
      return "prefix_hit";
    case Reason::kRecentDecision:
      return "recent_decision";
    case Reason::kCold:
      return "cold";
    case Reason::kAffinityGuard:
      return "affinity_guard";
    case Reason::kSession:
      return "session";
    case Reason::kLeastLoaded:
      return "least_loaded";
    case Reason::kRoundRobin:
      return "round_robin";
    case Reason::kPeerPull:
      return "peer_pull";
  }
  return "unknown";
}

}  // namespace kvfleet::router
