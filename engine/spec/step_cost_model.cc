#include "engine/spec/step_cost_model.h"

#include <algorithm>

namespace kvfleet::engine::spec {

StepCostModel::StepCostModel(double prior_fixed_tokens, double decay)
    : prior_fixed_tokens_(prior_fixed_tokens), decay_(decay) {
  // Unit scale until the first observation; only the ratio is used.
  per_token_ = 1.0;
  fixed_ = prior_fixed_tokens_;
}

void StepCostModel::Observe(int32_t tokens, double seconds) {
  if (tokens <= 0 || seconds <= 0.0) return;
  const double x = tokens;
  n_ = decay_ * n_ + 1.0;
  sx_ = decay_ * sx_ + x;
  sy_ = decay_ * sy_ + seconds;
  sxx_ = decay_ * sxx_ + x * x;
  sxy_ = decay_ * sxy_ + x * seconds;
  Refit();
}

void StepCostModel::Refit() {
  // The prior as two pseudo-observations on the line fixed = k × per_token,
  // scaled to the observed mean so it pulls the shape, not the scale: at 1
  // and at 1 + 2k tokens. It dominates only until a spread of batch sizes
  // has been seen.
  const double mean_x = sx_ / n_, mean_y = sy_ / n_;
  const double unit = mean_y / (prior_fixed_tokens_ + mean_x);  // per-token seconds the prior implies
  const double px[2] = {1.0, 1.0 + 2.0 * prior_fixed_tokens_};
  double n = n_, sx = sx_, sy = sy_, sxx = sxx_, sxy = sxy_;
  for (double x : px) {
    const double y = unit * (prior_fixed_tokens_ + x);
    n += 1.0;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double var = sxx - sx * sx / n;
  double slope = var > 1e-12 ? (sxy - sx * sy / n) / var : unit;
  slope = std::max(slope, 1e-9);  // more tokens never cost less
  const double intercept = std::max((sy - slope * sx) / n, 0.0);
  per_token_ = slope;
  fixed_ = intercept;
}

}  // namespace kvfleet::engine::spec
