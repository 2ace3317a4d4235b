// How likely a proposer's next drafted token is to be accepted, learnt from
// recent verifications.
//
// Acceptance is modelled per token: each drafted token is accepted with
// probability r given that all before it were, so a draft of k tokens keeps
// r + r² + … + r^k tokens on average. A verification that accepted a of k
// drafted tokens counts a successes and, when a < k, one failure (the tokens
// after the first rejection were never really tested). Old observations
// fade by `decay` per verification, so the estimate follows a request whose
// text turns from copying its prompt to writing something new.
//
//   AcceptanceEstimate e(/*prior_rate=*/0.5);
//   e.Observe(/*drafted=*/4, /*accepted=*/2);
//   double r = e.rate();
#pragma once

#include <cstdint>

namespace kvfleet::engine::spec {

class AcceptanceEstimate {
 public:
  // The rate before any observation, worth `prior_weight` observed tokens.
  explicit AcceptanceEstimate(double prior_rate = 0.5, double prior_weight = 2.0, double decay = 0.8)
      : prior_rate_(prior_rate), prior_weight_(prior_weight), decay_(decay) {}

  void Observe(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;
    successes_ = decay_ * successes_ + accepted;
    failures_ = decay_ * failures_ + (accepted < drafted ? 1.0 : 0.0);
  }

  double rate() const { return (successes_ + prior_weight_ * prior_rate_) / (successes_ + failures_ + prior_weight_); }

  // The expected number of tokens kept from a draft of k.
  double ExpectedAccepted(int32_t k) const {
    double total = 0.0, p = 1.0;
    for (int32_t j = 0; j < k; ++j) total += (p *= rate());
    return total;
  }

 private:
  double prior_rate_;
  double prior_weight_;
  double decay_;
  double successes_ = 0.0;
  double failures_ = 0.0;
};

}  // namespace kvfleet::engine::spec
