// How often a guess of a given worth is really kept, learnt across
// requests. A proposer's worth (DraftSlot::worths: draft heads' product of
// probabilities along the path) is its own belief; heads trained on little
// data are over- or under-confident, and sizing a draft on a wrong belief
// verifies guesses that do not pay. So the engine sizes by the learnt rate
// of the worth's bucket, which starts at the bucket's own worth and moves
// to what verification shows.
//
// Buckets: worth >= 0.9, 0.75, 0.6, 0.45, 0.3, 0.2, 0.12, 0.06, and below.
//
//   WorthCalibration calibration;
//   double p = calibration.Rate(0.42);         // 0.375 (the bucket's middle) before any data
//   calibration.Observe(0.42, /*kept=*/false);
#pragma once

#include <array>
#include <cstdint>

namespace kvfleet::engine::spec {

class WorthCalibration {
 public:
  static constexpr int kBuckets = 9;

  static int Bucket(double worth) {
    for (int b = 0; b < kBuckets - 1; ++b) {
      if (worth >= kLower[b]) return b;
    }
    return kBuckets - 1;
  }

  double Rate(double worth) const {
    const int b = Bucket(worth);
    const double prior = b == 0 ? 0.95 : (kLower[b] + kLower[b - 1]) / 2.0;
    return (kept_[b] + kPriorWeight * prior) / (tested_[b] + kPriorWeight);
  }

  void Observe(double worth, bool kept) {
    const int b = Bucket(worth);
    kept_[b] = kDecay * kept_[b] + (kept ? 1.0 : 0.0);
    tested_[b] = kDecay * tested_[b] + 1.0;
  }

 private:
  static constexpr std::array<double, kBuckets> kLower = {0.9, 0.75, 0.6, 0.45, 0.3, 0.2, 0.12, 0.06, 0.0};
  static constexpr double kPriorWeight = 4.0;
  static constexpr double kDecay = 0.995;  // about the last 200 guesses of the bucket
  std::array<double, kBuckets> kept_{};
  std::array<double, kBuckets> tested_{};
};

}  // namespace kvfleet::engine::spec
