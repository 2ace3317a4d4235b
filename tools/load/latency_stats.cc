#include "tools/load/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvfleet::load {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

void LatencyStats::Merge(const LatencyStats& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
}

double LatencyStats::Mean() const {
  if (samples_.empty()) return kNaN;
  return std::accumulate(samples_.begin(), samples_.end(), 0.0) / static_cast<double>(samples_.size());
}

double LatencyStats::Min() const {
  return samples_.empty() ? kNaN : *std::min_element(samples_.begin(), samples_.end());
}

double LatencyStats::Max() const {
  return samples_.empty() ? kNaN : *std::max_element(samples_.begin(), samples_.end());
}

double LatencyStats::Percentile(double p) const {
  if (samples_.empty()) return kNaN;
  p = std::clamp(p, 0.0, 100.0);
  const size_t n = samples_.size();
  // Nearest rank, 1-based: ceil(p/100 * n), at least 1. The small epsilon
  // keeps p = 90, n = 10 at rank 9 despite 0.9 * 10 = 9.000000000000002.
  const double exact = p / 100.0 * static_cast<double>(n);
  size_t rank = static_cast<size_t>(std::ceil(exact - 1e-9));
  rank = std::clamp<size_t>(rank, 1, n);
  // A copy keeps Percentile const and the samples in arrival order; O(n)
  // per call, which is nothing next to the run that made the samples.
  std::vector<double> copy = samples_;
  std::nth_element(copy.begin(), copy.begin() + static_cast<ptrdiff_t>(rank - 1), copy.end());
  return copy[rank - 1];
}

}  // namespace kvfleet::load
