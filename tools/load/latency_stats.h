// Samples of one latency (TTFT, inter-token or end-to-end) and their
// summary: count, mean, min, max and nearest-rank percentiles.
//
// Owns its samples, in seconds, in the order added. Percentile(p) is the
// nearest-rank percentile: the smallest sample with at least p% of the
// samples at or below it, i.e. sorted[ceil(p/100 * n) - 1] (sorted[0] for
// p = 0). It is always a value that was observed, never an interpolation.
// Empty stats return NaN from every summary. Thread-safety: none; each load
// thread fills its own and the runner merges them after joining.
//
//   LatencyStats ttft;  ttft.Add(0.042);
//   double p99 = ttft.Percentile(99);
#pragma once

#include <cstddef>
#include <vector>

namespace kvfleet::load {

class LatencyStats {
 public:
  void Add(double seconds) { samples_.push_back(seconds); }
  void Merge(const LatencyStats& other);

  size_t count() const { return samples_.size(); }
  double Mean() const;
  double Min() const;
  double Max() const;
  // p in [0, 100]; values outside are clamped.
  double Percentile(double p) const;

  const std::vector<double>& samples() const { return samples_; }

 private:
  std::vector<double> samples_;
};

}  // namespace kvfleet::load
