// Acceptance learnt per evidence level, across requests: a lookup
// proposer's drafts copied from a long match are kept far more often than
// those from a two-token match, so the adaptive draft length asks the
// draft's own level, not the request's history alone.
//
// Levels bucket a proposer's DraftSlot::evidence (a match length): 1, 2, 3,
// 4-5, 6-8, 9-12 and 13 or more. Each level is an AcceptanceEstimate that
// fades slower than a request's (it sees every request's drafts).
//
//   AcceptanceByEvidence by_evidence;
//   double r = by_evidence.Rate(/*evidence=*/14, /*fallback=*/req.acceptance.rate());
//   by_evidence.Observe(14, /*drafted=*/8, /*accepted=*/8);
#pragma once

#include <array>
#include <cstdint>

#include "engine/request/acceptance_estimate.h"

namespace kvfleet::engine::spec {

class AcceptanceByEvidence {
 public:
  static constexpr int kLevels = 8;  // 0: no evidence

  static int Level(int32_t evidence) {
    if (evidence <= 0) return 0;
    if (evidence <= 3) return evidence;
    if (evidence <= 5) return 4;
    if (evidence <= 8) return 5;
    if (evidence <= 12) return 6;
    return 7;
  }

  // The level's rate, or `fallback` for a draft without evidence.
  double Rate(int32_t evidence, double fallback) const {
    const int level = Level(evidence);
    return level > 0 ? levels_[level].rate() : fallback;
  }

  void Observe(int32_t evidence, int32_t drafted, int32_t accepted) {
    if (const int level = Level(evidence); level > 0) levels_[level].Observe(drafted, accepted);
  }

 private:
  static constexpr double kDecay = 0.95;
  std::array<AcceptanceEstimate, kLevels> levels_ = Fresh();

  static std::array<AcceptanceEstimate, kLevels> Fresh() {
    return {AcceptanceEstimate(0.5, 2.0, kDecay), AcceptanceEstimate(0.5, 2.0, kDecay),
            AcceptanceEstimate(0.5, 2.0, kDecay), AcceptanceEstimate(0.5, 2.0, kDecay),
            AcceptanceEstimate(0.5, 2.0, kDecay), AcceptanceEstimate(0.5, 2.0, kDecay),
            AcceptanceEstimate(0.5, 2.0, kDecay), AcceptanceEstimate(0.5, 2.0, kDecay)};
  }
};

}  // namespace kvfleet::engine::spec
