#include "tools/eval/distribution_stats.h"

#include <algorithm>
#include <cmath>

namespace kvfleet::tools {
namespace {

size_t ArgMax(std::span<const double> x) {
  return static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// The q-quantile of sorted values (nearest rank).
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t i = std::min(sorted.size() - 1,
                            static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()))) - (q > 0 ? 1 : 0));
  return sorted[i];
}

}  // namespace

std::vector<double> LogSoftmax(std::span<const float> logits) {
  double max = -INFINITY;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_z = max + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
  return out;
}

void PerplexityStats::Add(double nll) {
  ++count_;
  sum_ += nll;
  sum_squares_ += nll * nll;
}

double PerplexityStats::perplexity() const { return count_ == 0 ? 0.0 : std::exp(sum_ / static_cast<double>(count_)); }

double PerplexityStats::perplexity_stderr() const {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double mean = sum_ / n;
  const double variance = sum_squares_ / n - mean * mean;
  return variance > 0 ? perplexity() * std::sqrt(variance / (n - 1)) : 0.0;
}

void DivergenceStats::Add(std::span<const double> reference, std::span<const double> evaluated, model::TokenId next) {
  double kl = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double p = std::exp(reference[i]);
    if (p > 0) kl += p * (reference[i] - evaluated[i]);
  }
  kl_.push_back(kl);
  same_top1_ += ArgMax(reference) == ArgMax(evaluated);
  const double dp = std::exp(evaluated[static_cast<size_t>(next)]) - std::exp(reference[static_cast<size_t>(next)]);
  sum_delta_p2_ += dp * dp;
}

DivergenceSummary DivergenceStats::Summary() const {
  DivergenceSummary s{.positions = static_cast<int64_t>(kl_.size())};
  if (kl_.empty()) return s;
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0.0;
  for (double k : sorted) sum += k;
  const double n = static_cast<double>(sorted.size());
  s.mean_kl = sum / n;
  s.median_kl = Quantile(sorted, 0.5);
  s.p99_kl = Quantile(sorted, 0.99);
  s.max_kl = sorted.back();
  s.same_top1 = static_cast<double>(same_top1_) / n;
  s.rms_delta_p = std::sqrt(sum_delta_p2_ / n);
  return s;
}

}  // namespace kvfleet::tools
