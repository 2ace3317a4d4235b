// What a forward step costs as a function of the tokens it computes,
// learnt online: seconds ≈ fixed + per_token × tokens.
//
// The fixed part is what every step pays however few tokens it computes
// (reading all the weights, launching the layers); the per-token part is
// the arithmetic that grows with the batch. Speculation pays while the
// fixed part dominates (small batches: verifying k more tokens is nearly
// free) and stops paying once the per-token part does. Only the ratio of
// the two matters to that decision, so the prior sets a shape (fixed =
// prior_fixed_tokens × per_token) and the observations set the rest.
//
// A least-squares fit over exponentially decayed sums; O(1) per step.
//
//   StepCostModel cost;
//   cost.Observe(/*tokens=*/5, /*seconds=*/0.021);
//   double t = cost.Seconds(12);
#pragma once

#include <cstdint>

namespace kvfleet::engine::spec {

class StepCostModel {
 public:
  // decay: weight kept by past observations per new one.
  explicit StepCostModel(double prior_fixed_tokens = 4.0, double decay = 0.98);

  void Observe(int32_t tokens, double seconds);

  double fixed_seconds() const { return fixed_; }
  double seconds_per_token() const { return per_token_; }
  double Seconds(double tokens) const { return fixed_ + per_token_ * tokens; }

 private:
  void Refit();

  double prior_fixed_tokens_;
  double decay_;
  // Decayed sums of the weighted observations: n, Σx, Σy, Σx², Σxy.
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double fixed_, per_token_;
};

}  // namespace kvfleet::engine::spec
